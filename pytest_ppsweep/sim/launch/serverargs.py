"""The ``sglang.launch_server`` command line (the subset the seeds and the plugin use).

Unknown flags fail exactly like argparse does in SGLang (exit 2, usage, ``error: unrecognized
arguments: ...``). Names, aliases, choices and defaults follow SGLang 0.5.23 (contract §3.4/§3.5).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, fields

MOE_RUNNER_BACKENDS = (
    "auto",
    "deep_gemm",
    "triton",
    "triton_kernel",
    "flashinfer_trtllm",
    "flashinfer_cutlass",
    "flashinfer_mxfp4",
    "flashinfer_cutedsl",
    "cutlass",
    "experimental_sgl_trtllm",
    "flashinfer_trtllm_routed",
    "flashinfer_megamoe",
    "aiter",
    "marlin",
    "humming",
    "experimental_sgl_marlin",
    "lora_triton",
    "lora_cutlass",
    "hpc_ops",
    "megamoe",
    "intel_xpu",
)
MOE_A2A_BACKENDS = (
    "none",
    "deepep",
    "mooncake",
    "nixl",
    "mori",
    "ascend_fuseep",
    "flashinfer",
    "megamoe",
    "deepep_v2",
    "ascend_tp",
    "pplx",
    "flashinfer_megamoe",
)
# a2a backends that make SGLang rewrite ep_size to tp_size (contract §1.3; 0.5.23's
# _A2A_EP_SPANNING_BACKENDS in sglang/srt/arg_groups/overrides.py: every backend but ascend_tp)
EP_SPANNING_A2A = frozenset(MOE_A2A_BACKENDS) - {"none", "ascend_tp"}
# PD disaggregation (0.5.23 sglang/srt/arg_groups/fields/disagg.py, choices.py): the role, the
# KV transfer backend (DISAGG_TRANSFER_BACKEND_CHOICES) and the prefill's bootstrap port
DISAGGREGATION_MODES = ("null", "prefill", "decode")
DISAGG_TRANSFER_BACKENDS = ("mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp")
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--ssl-keyfile-password")


@dataclass(frozen=True)
class ServerArgs:
    """Parsed launch arguments (before SGLang-style resolution of defaults)."""

    model_path: str
    tokenizer_path: str | None
    tp_size: int
    pp_size: int
    ep_size: int
    dp_size: int
    nnodes: int
    node_rank: int
    dist_init_addr: str | None
    host: str
    port: int
    moe_runner_backend: str
    moe_a2a_backend: str
    chunked_prefill_size: int | None
    disable_radix_cache: bool
    mem_fraction_static: float | None
    pp_max_micro_batch_size: int | None
    max_running_requests: int | None
    max_total_tokens: int | None
    max_prefill_tokens: int
    watchdog_timeout: float
    dist_timeout: int | None
    disable_cuda_graph: bool
    disable_decode_cuda_graph: bool
    disable_prefill_cuda_graph: bool
    log_level: str
    enable_metrics: bool
    skip_server_warmup: bool
    served_model_name: str | None
    trust_remote_code: bool
    context_length: int | None
    device: str | None
    attention_backend: str | None
    sampling_backend: str | None
    api_key: str | None
    admin_api_key: str | None
    page_size: int
    random_seed: int | None
    disaggregation_mode: str = "null"
    disaggregation_transfer_backend: str = "mooncake"
    disaggregation_bootstrap_port: int = 8998

    @property
    def decode_graph(self) -> bool:
        """Whether decode CUDA graphs get captured."""
        return not (self.disable_cuda_graph or self.disable_decode_cuda_graph)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser, named like SGLang's module entry point."""
    p = argparse.ArgumentParser(prog="launch_server.py")
    a = p.add_argument
    a(
        "--model-path",
        "--model",
        dest="model_path",
        type=str,
        required=True,
        help="The path of the model weights.",
    )
    a("--tokenizer-path", type=str, default=None)
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    a("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    a("--ep-size", "--expert-parallel-size", "--ep", dest="ep_size", type=int, default=1)
    a("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr", type=str, default=None)
    a("--host", type=str, default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--moe-runner-backend", type=str, choices=MOE_RUNNER_BACKENDS, default="auto")
    a("--moe-a2a-backend", type=str, choices=MOE_A2A_BACKENDS, default="none")
    a("--chunked-prefill-size", type=int, default=None)
    a("--disable-radix-cache", action="store_true")
    a("--mem-fraction-static", type=float, default=None)
    a(
        "--pp-max-micro-batch-size",
        type=int,
        default=None,
        help="The maximum micro batch size in pipeline parallelism.",
    )
    a("--max-running-requests", type=int, default=None)
    a("--max-total-tokens", type=int, default=None)
    a("--max-prefill-tokens", type=int, default=16384)
    a(
        "--watchdog-timeout",
        type=float,
        default=300,
        help="If a forward batch takes longer than this, the server will crash to prevent hanging.",
    )
    a("--dist-timeout", type=int, default=None)
    a("--disable-cuda-graph", action="store_true")
    a("--disable-decode-cuda-graph", action="store_true")
    a("--disable-prefill-cuda-graph", action="store_true")
    a("--log-level", type=str, default="info")
    a("--enable-metrics", action="store_true")
    a("--skip-server-warmup", action="store_true")
    a("--served-model-name", type=str, default=None)
    a("--trust-remote-code", action="store_true")
    a("--context-length", type=int, default=None)
    a("--device", type=str, default=None)
    a("--attention-backend", type=str, default=None)
    a("--sampling-backend", type=str, default=None)
    a("--api-key", type=str, default=None)
    a("--admin-api-key", type=str, default=None)
    # accepted and unused, as SGLang 0.5.23 has them (TLS is not emulated): a sweep's TLS flags
    # pass the preflight's flag check against this parser
    a("--ssl-keyfile", type=str, default=None)
    a("--ssl-certfile", type=str, default=None)
    a("--ssl-keyfile-password", type=str, default=None)
    a("--page-size", type=int, default=1)
    a("--random-seed", type=int, default=None)
    a("--disaggregation-mode", type=str, choices=DISAGGREGATION_MODES, default="null",
      help='Only used for PD disaggregation. "prefill" for prefill-only server, and "decode" '
      "for decode-only server. If not specified, it is not PD disaggregated")
    a("--disaggregation-transfer-backend", type=str, choices=DISAGG_TRANSFER_BACKENDS,
      default="mooncake", help="The backend for disaggregation transfer. Default is mooncake.")
    a("--disaggregation-bootstrap-port", type=int, default=8998,
      help="Bootstrap server port on the prefill server. Default is 8998.")
    return p


def parse_args(argv: Sequence[str]) -> ServerArgs:
    """Parse ``argv`` (exits 2 on unknown flags, like argparse in SGLang)."""
    ns = build_parser().parse_args(list(argv))
    values = {f.name: getattr(ns, f.name) for f in fields(ServerArgs)}
    return ServerArgs(**values)


def redact_command(argv: Sequence[str]) -> str:
    """The launch command with secret values replaced (SGLang's ``launch_command``)."""
    out: list[str] = []
    hide_next = False
    for item in argv:
        if hide_next:
            out.append("<redacted>")
            hide_next = False
            continue
        flag, eq, _ = item.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                out.append(f"{flag}=<redacted>")
            else:
                out.append(item)
                hide_next = True
            continue
        out.append(item)
    return " ".join(out)
