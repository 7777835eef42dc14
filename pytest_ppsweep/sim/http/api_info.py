"""JSON payloads of ``/server_info``, ``/model_info``, ``/v1/models`` (contract §1.3/§1.4/§1.6).

Field names and types are copied from a real SGLang 0.5.23 ``/server_info`` capture. Secrets
(``api_key``, ``admin_api_key``, ``ssl_keyfile_password``) are never echoed: ``"<redacted>"``
when set, null otherwise.
"""

from __future__ import annotations

import os
from typing import Any

from .. import SGLANG_VERSION
from ..launch.config import SimConfig
from ..launch.serverargs import redact_command

DECODE_GRAPH_BS = [
    1,
    2,
    4,
    8,
    12,
    16,
    24,
    32,
    40,
    48,
    56,
    64,
    72,
    80,
    88,
    96,
    104,
    112,
    120,
    128,
    136,
    144,
    152,
    160,
    168,
    176,
    184,
    192,
    200,
    208,
    216,
    224,
    232,
    240,
    248,
    256,
]


def prefill_graph_bs(max_tokens: int) -> list[int]:
    """Token counts of the prefill CUDA-graph buckets up to ``max_tokens`` (SGLang's ladder)."""
    ladder = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32),
              *range(576, 1025, 64), *range(1280, max(max_tokens, 0) + 1, 256)]  # fmt: skip
    return [n for n in ladder if n <= max_tokens]


def _num(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _secret(value: str | None) -> str | None:
    return "<redacted>" if value else None


def reported_topology(cfg: SimConfig) -> tuple[int, int, int]:
    """(tp, pp, ep) the server reports; the ``wrong_topology`` fault changes it."""
    tp, pp, ep = cfg.layout.tp, cfg.layout.pp, cfg.layout.ep
    if cfg.settings.faults.get("wrong_topology") is None:
        return tp, pp, ep
    if pp > 1:
        return tp * pp, 1, tp * pp if ep == tp else ep
    return max(tp // 2, 1), 2, 1 if ep != 1 else max(tp // 2, 1)


def server_args_dict(cfg: SimConfig) -> dict[str, Any]:
    """The flat, resolved ``ServerArgs`` of the launch (top level of ``/server_info``)."""
    a, mem = cfg.args, cfg.mem
    tp, pp, ep = reported_topology(cfg)
    decode = "disabled" if not a.decode_graph else "full"
    prefill = "disabled" if a.disable_prefill_cuda_graph or a.disable_cuda_graph else "breakable"
    return {
        "model_path": a.model_path,
        "tokenizer_path": a.tokenizer_path or a.model_path,
        "tokenizer_mode": "auto",
        "skip_tokenizer_init": False,
        "load_format": "auto",
        "trust_remote_code": a.trust_remote_code,
        "context_length": a.context_length,
        "is_embedding": False,
        "revision": None,
        "dtype": "auto",
        "quantization": None,
        "kv_cache_dtype": "auto",
        "mem_fraction_static": mem.mem_fraction_static,
        "max_running_requests": a.max_running_requests,
        "max_queued_requests": None,
        "max_total_tokens": a.max_total_tokens,
        "chunked_prefill_size": cfg.chunked_prefill_size,
        "max_prefill_tokens": a.max_prefill_tokens,
        "schedule_policy": "fcfs",
        "schedule_conservativeness": 1.0,
        "page_size": a.page_size,
        # a decode server runs without the radix cache unless asked for it (0.5.23
        # pd_disaggregation_hook.py: "Radix cache is disabled for decode server")
        "disable_radix_cache": a.disable_radix_cache or a.disaggregation_mode == "decode",
        "disable_overlap_schedule": pp > 1,
        "nccl_port": None,
        "dist_timeout": a.dist_timeout,
        "dist_init_addr": a.dist_init_addr,
        "nnodes": a.nnodes,
        "node_rank": a.node_rank,
        "tp_size": tp,
        "pp_size": pp,
        "pp_max_micro_batch_size": a.pp_max_micro_batch_size,
        "pp_async_batch_depth": 0,
        "dp_size": a.dp_size,
        "attn_dp_size": 1,
        "enable_dp_attention": False,
        "moe_dp_size": 1,
        "ep_size": ep,
        "moe_a2a_backend": a.moe_a2a_backend,
        "moe_runner_backend": a.moe_runner_backend,
        "moe_dense_tp_size": None,
        "device": a.device or "cuda",
        "random_seed": a.random_seed if a.random_seed is not None else cfg.settings.seed,
        "watchdog_timeout": _num(a.watchdog_timeout),
        "soft_watchdog_timeout": None,
        "host": a.host,
        "port": a.port,
        "skip_server_warmup": a.skip_server_warmup,
        "ssl_keyfile_password": None,
        "api_key": _secret(a.api_key),
        "admin_api_key": _secret(a.admin_api_key),
        "served_model_name": cfg.served_model_name,
        "weight_version": "default",
        "log_level": a.log_level,
        "log_level_http": None,
        "enable_metrics": a.enable_metrics,
        "attention_backend": a.attention_backend or "flashinfer",
        "sampling_backend": a.sampling_backend or "flashinfer",
        "cuda_graph_config": {
            "decode": {"backend": decode, "max_bs": 256, "bs": DECODE_GRAPH_BS},
            "prefill": {
                "backend": prefill,
                "max_bs": cfg.chunked_prefill_size,
                "bs": prefill_graph_bs(cfg.chunked_prefill_size),
            },
        },
        "disable_cuda_graph": a.disable_cuda_graph,
        "disable_decode_cuda_graph": a.disable_decode_cuda_graph,
        "disable_prefill_cuda_graph": a.disable_prefill_cuda_graph,
        "disable_cuda_graph_padding": False,
        "disable_custom_all_reduce": False,
        "enable_mixed_chunk": False,
        "speculative_algorithm": None,
        "disaggregation_mode": a.disaggregation_mode,
        "disaggregation_transfer_backend": cfg.transfer_backend,
        "disaggregation_bootstrap_port": a.disaggregation_bootstrap_port,
    }


def server_info(
    cfg: SimConfig, *, startup: dict[str, Any], pp_micro: int, last_gen_throughput: float
) -> dict[str, Any]:
    """The whole ``/server_info`` document of rank 0."""
    mem = cfg.mem
    args = server_args_dict(cfg)
    graph_gb = mem.graph_bytes(0) / 1e9
    internal = {
        **args,
        "pp_max_micro_batch_size": pp_micro,
        "world_size": cfg.layout.world_size,
        "startup_time": {k: v for k, v in startup.items() if k != "tokenizer_e2e"},
        "effective_max_running_requests_per_dp": mem.max_running_requests,
        "last_gen_throughput": last_gen_throughput,
        "memory_usage": {
            "weight": round(mem.weights_bytes(0) / 1e9, 3),
            "kvcache": round(mem.kv_gb(0), 3),
            "startup_available": round(
                cfg.profile.gpu.memory_total_mib * 1.048576e-3
                - mem.used_mib(0, "kv") * 1.048576e-3,
                3,
            ),
            "token_capacity": mem.max_total_num_tokens,
            "token_capacity_swa": None,
            "graph": {
                "prefill": 0.0,
                "decode": round(graph_gb, 3),
                "target_verify": 0.0,
                "draft_prefill": 0.0,
                "draft_decode": 0.0,
                "draft_extend": 0.0,
            },
        },
        "decode_cuda_graph_bs": DECODE_GRAPH_BS if cfg.args.decode_graph else [],
        "decode_cuda_graph_memory_gb": round(graph_gb, 3),
    }
    max_req_len = min(mem.context_length - 1, mem.max_total_num_tokens - 1)
    return {
        **args,
        "launch_command": redact_command(cfg.argv),
        "status": "ready",
        "max_total_num_tokens": mem.max_total_num_tokens,
        "max_req_input_len": max_req_len - 5,
        "startup_time": startup,
        "hicache_object_layout": {
            "enabled": False,
            "backend": None,
            "page_size": cfg.args.page_size,
            "hicache_object_layout": {"pools": []},
            "reason": "Hierarchical cache is disabled",
        },
        "kv_events": None,
        "internal_states": [internal],
        "version": SGLANG_VERSION,
        "frontend": "python",
        "ppsweep_sim": {
            "simulated": True,
            "time_scale": cfg.settings.time_scale,
            "profile": cfg.profile.name,
            "faults": cfg.settings.faults.labels(),
            "pid": os.getpid(),
            "boot_token": cfg.settings.boot_token,
            # False on a P/D server with the fake KV transfer: decode runs over KV nobody
            # computed (sim/http/disagg.py), so no accuracy check may read its outputs
            "outputs_meaningful": cfg.transfer_backend != "fake"
            or cfg.args.disaggregation_mode == "null",
        },
    }


def model_info(cfg: SimConfig) -> dict[str, Any]:
    """``/model_info`` (NEW keys, in SGLang 0.5.23's order, with its ``embedding`` plan)."""
    a, m = cfg.args, cfg.profile.model
    return {
        "model_path": a.model_path,
        "served_model_name": cfg.served_model_name,
        "tokenizer_path": a.tokenizer_path or a.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": None,
        "tool_call_parser": None,
        "disaggregation_mode": cfg.args.disaggregation_mode,
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": m.model_type,
        "architectures": list(m.architectures),
        "embedding": _embedding_plan(cfg),
    }


def _embedding_plan(cfg: SimConfig) -> dict[str, Any]:
    """The resolved embedding plan of a generation model (embedding disabled)."""
    radix_off = cfg.args.disable_radix_cache
    return {
        "family": "none",
        "task": "none",
        "execution": "none",
        "attention": "none",
        "pooling": "model_defined",
        "normalize": False,
        "postprocessor": "none",
        "tokenizer_special_tokens": "model_default",
        "supports_dimensions": False,
        "supports_token_embeddings": False,
        "supports_multimodal": False,
        "requires_embedding_flag": False,
        "auto_enable_embedding": False,
        "bcg_eligibility": "disabled",
        "safe_disable_kv_cache": False,
        "safe_disable_radix_cache": False,
        "safe_disable_chunked_prefill": False,
        "enabled": False,
        "matryoshka_dimensions": [],
        "bcg": {
            "prefill_backend": "disabled",
            "enabled": False,
            "capture_token_budget": cfg.chunked_prefill_size,
            "capture_batch_sizes": prefill_graph_bs(cfg.chunked_prefill_size),
        },
        "cache": {
            "kv_cache_disabled": False,
            "radix_cache_disabled": radix_off,
            "chunked_prefill_disabled": cfg.chunked_prefill_size <= 0,
        },
    }


def models_list(cfg: SimConfig, created: int) -> dict[str, Any]:
    """``/v1/models``."""
    name = cfg.served_model_name
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "sglang",
                "root": name,
                "parent": None,
                "max_model_len": cfg.mem.context_length,
            }
        ],
    }
