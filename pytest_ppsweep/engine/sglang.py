"""SGLang: every fact of SGLang the plugin uses, and nowhere else (docs: SGLANG_CONTRACT.md).

The rank command of ``sglang.launch_server`` (one rank per node, §1.1), the flags the plugin
derives from the layout, SGLang's EP = TP rewrite with an EP-spanning a2a backend (§1.3), the
server info's fields (§1.3: the effective micro-batch cap lives in ``internal_states[0]``), the
boot milestones (§3.1) and the fatal lines of its own (§3.6), the endpoints and the version's
distribution. The emulator (sim/) speaks the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ppsweep.engine.argparse_dump import ARGS_SCRIPT
from pytest_ppsweep.engine.base import (
    Endpoints,
    GreedyAnswer,
    Knobs,
    StreamEvent,
    Topology,
    counter_sum,
    json_number,
    json_object,
)

NAME = "sglang"

# SGLang's boot milestones, in the order a rank logs them (the emulator prints the same lines;
# tests/data/sglang/*.log are real ones). The matched text is what a status line shows.
MILESTONES: tuple[str, ...] = (
    "Init torch distributed begin",
    "Init torch distributed ends",
    "Load weight begin",
    "Load weight end",
    "KV Cache is allocated",
    "Memory pool end",
    "Capture cuda graph begin",
    "Capture cuda graph end",
    "Application startup complete",
    "Uvicorn running on",
    "The server is fired up and ready to roll!",
)

# SGLang's own fatal lines, by the log scan's kind (service/logscan.py merges them with the
# generic patterns of the same kind, in its order of kinds).
FATAL_PATTERNS: Mapping[str, str] = {
    # a scheduler of another rank gone: a consequence, names where to look
    "consequence": r"[Rr]ank \d+ scheduler is dead",
    # SGLang's subprocess watchdog: "Subprocess scheduler_0 (pid=…) crashed with exit code -9"
    "killed": r"crashed with exit code -\d+",
    "cuda-oom": r"Not enough memory\. Please try to increase|Prefill out of memory"
                r"|Decode out of memory",
    "watchdog": r"[Ww]atchdog timeout \(self\.watchdog_timeout",
    "engine": r"Initialization failed|Capture cuda graph failed|custom_all_reduce\.cuh"
              r"|Health check failed",
    # a launcher's echo of its own children's failure (SGLang's SIGQUIT cleanup)
    "sigquit": r"Received sigquit|SIGQUIT received|crashed with exit code \d+",
    "exception": r"hit an exception",
}

# The emulator's first line (sim/): its time scale in group 1.
EMULATOR_BANNER = r"SIMULATED SGLang \(pytest-ppsweep emulator, time scale ([0-9.eE+]+)x"

# The flags the plugin derives from the layout and the cluster; a sweep file must not set them.
# A P/D server's role, bootstrap port and transfer backend too (role_flags: from the role table,
# the cluster's bootstrap_port and [sweep] transfer_backend).
OWNED_FLAGS = frozenset({"tp_size", "pp_size", "ep_size", "nnodes", "node_rank",
                         "dist_init_addr", "host", "port", "model_path",
                         "disaggregation_mode", "disaggregation_bootstrap_port",
                         "disaggregation_transfer_backend"})

# P/D disaggregation (SGLang 0.5.23, sglang/srt/arg_groups/fields/disagg.py): the server's role
# ("null" when not disaggregated), the prefill server's KV bootstrap port (default 8998) and the
# transfer backend (arg_groups/choices.py DISAGG_TRANSFER_BACKEND_CHOICES, mooncake the default;
# "fake" transfers nothing: decode runs over uncomputed KV).
TRANSFER_BACKENDS = ("mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp")
# The router: sglang-router 0.3.2's ``sglang_router.launch_router`` (router_args.py: --policy's
# choices; cache_aware is RouterArgs.policy's default).
ROUTER_MODULE = "sglang_router.launch_router"
# sglang-router's fatal lines (matched with its colour codes taken out: it colours a log that is
# no terminal too, and ignores NO_COLOR): an ERROR-level line and a Rust panic. Not
# the ERROR it logs for each 503 of its own /readiness while it registers the servers (the boot
# wait's polls), and not its WARN lines: it warns while a server it retries is still booting,
# and when it cannot fetch a tokenizer for the model path (it routes without one).
ROUTER_FATAL_PATTERNS: Mapping[str, str] = {
    "router-error": r"(?:^|\s)ERROR\s(?!.*\buri=/readiness\b)",
    "router-panic": r"panicked at",
}
ROUTER_POLICIES = ("cache_aware", "random", "round_robin", "power_of_two", "manual")

# Short names of the axes' id parts (``a2a_deepep``, ``chunk16k``, ``mbs1``); any other flag
# is named as written.
AXIS_SHORT: Mapping[str, str] = {
    "moe_a2a_backend": "a2a",
    "chunked_prefill_size": "chunk",
    "pp_max_micro_batch_size": "mbs",
    "moe_runner_backend": "moe",
    "mem_fraction_static": "mem",
    "max_running_requests": "maxreq",
}

# SGLang sets ep_size = tp_size with these a2a backends (SGLANG_CONTRACT.md §1.3, the NEW
# list: sglang 0.5.23's arg_groups/moe_hook.py; OLD versions only deepep and mooncake, which
# ``[sweep] a2a_ep_backends = ["deepep", "mooncake"]`` says). The emulator does the same.
EP_SPANNING_A2A = ("deepep", "deepep_v2", "mooncake", "nixl", "mori", "pplx", "flashinfer",
                   "megamoe", "flashinfer_megamoe", "ascend_fuseep")

ENDPOINTS = Endpoints(
    health="/health",
    generate="/generate",
    completions="/v1/completions",
    models="/v1/models",
    flush_cache="/flush_cache",
    start_profile="/start_profile",
    stop_profile="/stop_profile",
    # /server_info since SGLang 0.5.2x; /get_server_info before
    server_info=("/server_info", "/get_server_info"),
    metrics="/metrics",
)

KNOBS = Knobs(
    chunk="chunked_prefill_size",
    micro_batch="pp_max_micro_batch_size",
    moe_a2a="moe_a2a_backend",
    moe_runner="moe_runner_backend",
    mem_fraction="mem_fraction_static",
    max_running="max_running_requests",
    decode_graph_off="disable_decode_cuda_graph",
    profile_request="SGLang's ProfileReq",
)


def server_flags(server: Mapping[str, Any]) -> list[str]:
    """``{"disable_radix_cache": True, "chunked_prefill_size": 8192}`` → CLI flags."""
    flags: list[str] = []
    for key, value in server.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            continue
        else:
            flags += [flag, str(value)]
    return flags


def _arg(argv: Sequence[str], flag: str) -> str | None:
    """The value after ``flag`` (or of ``flag=value``) in ``argv``."""
    for i, item in enumerate(argv):
        if item == flag and i + 1 < len(argv):
            return argv[i + 1]
        if item.startswith(flag + "="):
            return item.split("=", 1)[1]
    return None


# a rank's part of its profiler trace's file name
_TRACE_TP = re.compile(r"-TP-(\d+)")
_TRACE_PP = re.compile(r"-PP-(\d+)")

# meta_info → the load generator's record
_META_FIELDS = (("prompt_tokens",) * 2, ("cached_tokens",) * 2, ("completion_tokens",) * 2,
                ("e2e_latency", "server_e2e_latency"),
                ("first_token_latency", "server_first_token_latency"))


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _first_int(*values: Any) -> int | None:
    return next((v for v in map(_int, values) if v is not None), None)


@dataclass(frozen=True)
class SGLang:
    """SGLang's ``launch_server``, one rank per node."""

    name: str = NAME
    legacy_version_key: str = "sglang_version"
    server_module: str = "sglang.launch_server"
    version_distribution: str = "sglang"
    owned_flags: frozenset[str] = OWNED_FLAGS
    endpoints: Endpoints = ENDPOINTS
    knobs: Knobs = KNOBS
    axis_short: Mapping[str, str] = field(default_factory=lambda: dict(AXIS_SHORT))
    ep_spanning_a2a: tuple[str, ...] = EP_SPANNING_A2A
    milestones: tuple[str, ...] = MILESTONES
    fatal_patterns: Mapping[str, str] = field(default_factory=lambda: dict(FATAL_PATTERNS))
    emulator_banner: str = EMULATOR_BANNER
    router_module: str = ROUTER_MODULE
    router_policies: tuple[str, ...] = ROUTER_POLICIES
    transfer_backends: tuple[str, ...] = TRANSFER_BACKENDS

    def server_flags(self, server: Mapping[str, Any]) -> list[str]:
        return server_flags(server)

    def flag_of(self, key: str) -> str:
        return "--" + key.replace("_", "-")

    def layout_flag(self, axis: str) -> str:
        return f"--{axis}-size"

    def rank_argv(self, *, python: str, module: str, model_path: str, pp: int, tp: int, ep: int,
                  nnodes: int, node_rank: int, dist_init: str, host: str, port: int,
                  server: Mapping[str, Any], dp: int = 1) -> list[str]:
        """SGLang's world is DP × TP × PP (server_args.compute_world_size); ``--dp-size`` only
        with several replicas, so a one-replica rank's argv is what it always was."""
        return [
            python, "-m", module,
            "--model-path", model_path,
            "--tp-size", str(tp),
            "--pp-size", str(pp),
            "--ep-size", str(ep),
            *(["--dp-size", str(dp)] if dp > 1 else []),
            "--nnodes", str(nnodes),
            "--node-rank", str(node_rank),
            "--dist-init-addr", dist_init,
            # Every rank binds its node address so each health port is reachable (§1.1).
            "--host", host,
            "--port", str(port),
            *server_flags(server),
        ]

    def role_flags(self, role: str, *, bootstrap_port: int, transfer_backend: str
                   ) -> dict[str, Any]:
        """``--disaggregation-mode prefill|decode`` and ``--disaggregation-transfer-backend``
        on both roles (set the same on both, as SGLang's docs say), and
        ``--disaggregation-bootstrap-port`` on a prefill server (where its bootstrap server
        listens; the router hands it to the decode server per request)."""
        if role == "serve":
            return {}
        if role not in ("prefill", "decode"):
            raise ValueError(f"server role {role!r}: expected serve, prefill or decode")
        flags: dict[str, Any] = {"disaggregation_mode": role,
                                 "disaggregation_transfer_backend": transfer_backend}
        if role == "prefill":
            flags["disaggregation_bootstrap_port"] = bootstrap_port
        return flags

    def router_argv(self, *, python: str, host: str, port: int,
                    prefill: Sequence[tuple[str, int]], decode: Sequence[str], policy: str,
                    flags: Mapping[str, Any]) -> list[str]:
        """``python -m sglang_router.launch_router --pd-disaggregation --prefill URL PORT …
        --decode URL … --host H --port P --policy X`` (sglang-router 0.3.2's launcher: each
        ``--prefill`` takes its URL and bootstrap port, each ``--decode`` one URL)."""
        argv = [python, "-m", self.router_module, "--pd-disaggregation"]
        for url, bootstrap in prefill:
            argv += ["--prefill", url, str(bootstrap)]
        for url in decode:
            argv += ["--decode", url]
        return [*argv, "--host", host, "--port", str(port),
                "--policy", policy or self.router_policies[0], *server_flags(flags)]

    @property
    def router_fatal_patterns(self) -> Mapping[str, str]:
        return ROUTER_FATAL_PATTERNS

    @property
    def router_ready_path(self) -> str:
        return "/readiness"

    def router_unready(self, status: int, body: bytes, workers: int) -> str | None:
        """sglang-router 0.3.2's ``/readiness``: ``{"status": "ready", "healthy_workers": N,
        "total_workers": M}`` with 200 once the workers it was given answer their health
        checks (verified against the router binary); ready when all ``workers`` are healthy."""
        try:
            found = json.loads(body)
        except ValueError:
            found = None
        if not isinstance(found, dict):
            return f"/readiness answered {status}: {body[:200]!r}"
        healthy = found.get("healthy_workers")
        if status != 200 or found.get("status") != "ready" or healthy != workers:
            return (f"/readiness answered {status}: status {found.get('status')!r}, "
                    f"{healthy} of {workers} servers healthy")
        return None

    def flags_argv(self, python: str, module: str) -> list[str]:
        """SGLang parses its command line with argparse: the generic dump."""
        return [python, "-c", ARGS_SCRIPT, module]

    def profile_request(self, *, output_dir: str, activities: Sequence[str], prefix: str,
                        profile_id: str, num_steps: int) -> dict[str, Any]:
        """SGLang 0.5.23's ``ProfileReq`` (sglang/srt/managers/io_struct.py)."""
        return {
            "output_dir": output_dir,
            "activities": list(activities),
            "profile_prefix": prefix,
            "profile_id": profile_id,
            "num_steps": num_steps,
            # Neither is needed for the attribution; SGLang defaults both on, which makes every
            # trace several times larger (a python_function event per Python call).
            "with_stack": False,
            "record_shapes": False,
        }

    def stream_request(self, ids: list[int], *, max_new_tokens: int) -> dict[str, Any]:
        """``/generate`` as bench_serving's ``sglang`` backend sends it."""
        return {
            "input_ids": ids,
            "sampling_params": {
                "max_new_tokens": max_new_tokens,
                "ignore_eos": True,
                "temperature": 0.0,
            },
            "stream": True,
        }

    def stream_event(self, event: dict[str, Any]) -> StreamEvent:
        """Its ``meta_info``: the token counts, the server's latencies, the finish reason (an
        object with ``type`` and ``message``, or a plain value)."""
        meta = json_object(event.get("meta_info"), "meta_info")
        fields = {dst: value for src, dst in _META_FIELDS
                  if (value := json_number(meta, src)) is not None}
        finish = meta.get("finish_reason")
        reason: tuple[Any, Any] | None = None
        if finish:
            if isinstance(finish, dict):
                reason = (finish.get("type"), finish.get("message", finish))
            else:
                reason = (str(finish) if isinstance(finish, (int, float)) else finish, finish)
        return StreamEvent(fields, reason, bool(event.get("text")))

    def prefix_counters(self, metrics: str) -> tuple[float, float] | None:
        """SGLang 0.5.23 with ``--enable-metrics``: ``sglang:cached_tokens_total`` (by
        cache_source) and ``sglang:prompt_tokens_total``, both counted by the tokenizer
        manager as each request finishes (observe_one_finished_request; a request sent with
        ``log_metrics`` false is not). The cached counter has no sample until a request hit
        the cache: 0 then."""
        prompt = counter_sum(metrics, "sglang:prompt_tokens_total")
        if prompt is None:
            return None
        return counter_sum(metrics, "sglang:cached_tokens_total") or 0.0, prompt

    def greedy_request(self, prompt: str | Sequence[int], *, max_new_tokens: int,
                       top_logprobs: int) -> dict[str, Any]:
        """SGLang's ``/generate`` body of one probe prompt: greedy, ``ignore_eos`` (every
        layout answers ``max_new_tokens`` tokens), the output's logprobs only
        (``logprob_start_len`` -1) with ``top_logprobs_num`` per position, token ids rather
        than texts."""
        body: dict[str, Any] = {"text": prompt} if isinstance(prompt, str) else {
            "input_ids": list(prompt)}
        body.update({
            "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens,
                                "ignore_eos": True},
            "return_logprob": True,
            "logprob_start_len": -1,
            "top_logprobs_num": top_logprobs,
            "return_text_in_logprobs": False,
            "stream": False,
            "log_metrics": False,  # not a measured request: the server's counters stay the rounds'
        })
        return body

    def greedy_answer(self, answer: Any) -> GreedyAnswer | str:
        """A ``/generate`` answer. SGLang 0.5.23's ``meta_info`` (tokenizer_manager.py
        ``add_logprob_to_meta_info``): ``output_token_logprobs`` is a list of ``[logprob,
        token_id, text|null]``, ``output_top_logprobs`` a list per position of such lists (or
        null); ``output_ids`` the generated ids."""
        if not isinstance(answer, dict) or not isinstance(answer.get("meta_info"), dict):
            return f"unexpected answer: {str(answer)[:200]}"
        meta = answer["meta_info"]
        tokens = meta.get("output_token_logprobs") or []
        ids = [int(t[1]) for t in tokens] or [int(t) for t in answer.get("output_ids") or []]
        logprobs = [None if t[0] is None else float(t[0]) for t in tokens]
        top = tuple(
            tuple(sorted(((int(e[1]), float(e[0])) for e in pos or () if e[0] is not None),
                         key=lambda x: -x[1]))
            for pos in meta.get("output_top_logprobs") or ()
        )
        return GreedyAnswer(tuple(ids), tuple(logprobs), top)

    def node_ranks(self, pp: int, tp: int, nnodes: int, node: int) -> list[tuple[int, int]]:
        """SGLang's ``_launch_subprocesses`` (sglang/srt/entrypoints/engine.py):
        ``pp_size_per_node = max(pp // nnodes, 1)``, ``nnodes_per_pp_rank = max(nnodes // pp,
        1)``, ``tp_size_per_node = tp // nnodes_per_pp_rank``; node ``n`` runs PP ranks from
        ``pp_size_per_node × (n // nnodes_per_pp_rank)`` and TP ranks from
        ``tp_size_per_node × (n % nnodes_per_pp_rank)``."""
        pp_per_node = max(pp // nnodes, 1)
        nodes_per_pp = max(nnodes // pp, 1)
        tp_per_node = tp // nodes_per_pp
        pp0 = pp_per_node * (node // nodes_per_pp)
        tp0 = tp_per_node * (node % nodes_per_pp)
        return [(p, t) for p in range(pp0, pp0 + pp_per_node)
                for t in range(tp0, tp0 + tp_per_node)]

    def trace_rank_name(self, pp_rank: int, tp_rank: int, pp: int) -> str:
        """``TP-1-PP-0`` (``TP-1`` when pp = 1): each rank's profiler writes
        ``[<prefix>-]<profile_id>-TP-<t>[-DP-<d>][-PP-<p>][-EP-<e>].trace.json.gz``
        (sglang/srt/managers/scheduler_components/profiler_manager.py)."""
        return f"TP-{tp_rank}" + (f"-PP-{pp_rank}" if pp > 1 else "")

    def trace_rank_of(self, filename: str, pp: int) -> tuple[int, int] | None:
        tp = _TRACE_TP.search(filename)
        if tp is None or not filename.endswith((".trace.json.gz", ".trace.json")):
            return None
        pr = _TRACE_PP.search(filename)
        if pp > 1 and pr is None:
            return None
        return (int(pr.group(1)) if pr else 0), int(tp.group(1))

    def rank_identity(self, argv: Sequence[str]) -> tuple[str | None, str | None, bool]:
        return _arg(argv, "--host"), _arg(argv, "--port"), _arg(argv, "--node-rank") == "0"

    def rendezvous_of(self, argv: Sequence[str]) -> str | None:
        return _arg(argv, "--dist-init-addr")

    def effective_ep(self, tp: int, ep: int, server: Mapping[str, Any],
                     spanning: Sequence[str]) -> int:
        a2a = server.get(KNOBS.moe_a2a)
        return tp if isinstance(a2a, str) and a2a in spanning and ep != tp else ep

    def logged_server_info(self, log: Iterable[str], metrics: str) -> dict[str, Any]:
        """Never asked: SGLang serves its server info (``/server_info``)."""
        raise NotImplementedError("SGLang serves /server_info; its log is not read for it")

    def topology(self, info: Mapping[str, Any]) -> Topology:
        """The effective micro-batch size lives in ``internal_states[0]``."""
        states = info.get("internal_states") or [{}]
        state = (states[0] if isinstance(states, list) and states
                 and isinstance(states[0], dict) else {})
        sim = info.get("ppsweep_sim") or {}
        mbs = _int(state.get("pp_max_micro_batch_size"))
        if mbs is None:
            mbs = _int(info.get("pp_max_micro_batch_size"))
        return Topology(
            pp=_int(info.get("pp_size")),
            tp=_int(info.get("tp_size")),
            ep=_int(info.get("ep_size")),
            nnodes=_int(info.get("nnodes")),
            moe_runner_backend=info.get("moe_runner_backend"),
            moe_a2a_backend=info.get("moe_a2a_backend"),
            pp_max_micro_batch_size=mbs,
            max_running_requests=_first_int(
                state.get("effective_max_running_requests_per_dp"),
                state.get("max_running_requests"),
                info.get("max_running_requests"),
            ),
            version=info.get("version"),
            simulated=bool(sim.get("simulated", False)),
            time_scale=float(sim.get("time_scale", 1.0)) if sim else 1.0,
            dp=_int(info.get("dp_size")),
            max_total_tokens=_first_int(state.get("max_total_num_tokens"),
                                        info.get("max_total_num_tokens")),
        )

    def topology_problems(self, config_id: str, want: Mapping[str, int],
                          server: Mapping[str, Any], topo: Topology) -> list[str]:
        problems = []
        wanted: tuple[tuple[str, int, int | None], ...] = (
            ("pp_size", want["pp"], topo.pp),
            ("tp_size", want["tp"], topo.tp),
            ("ep_size", want["ep"], topo.ep),
            ("nnodes", want["nnodes"], topo.nnodes),
        )
        for name, wanted_value, got in wanted:
            if got != wanted_value:
                problems.append(
                    f"{config_id}: server reports {name}={got}, the matrix asks {wanted_value}")
        for backend, reported in (
            ("moe_runner_backend", topo.moe_runner_backend),
            ("moe_a2a_backend", topo.moe_a2a_backend),
        ):
            asked_backend = server.get(backend)
            # SGLang keeps "auto" when nothing was asked (§1.3): accept it only then.
            if asked_backend is not None and reported != asked_backend:
                problems.append(
                    f"{config_id}: server reports {backend}={reported!r}, "
                    f"the matrix asks {asked_backend!r}"
                )
        mbs = topo.pp_max_micro_batch_size
        asked = server.get("pp_max_micro_batch_size")
        if mbs is None or mbs < 1:
            problems.append(
                f"{config_id}: no effective pp_max_micro_batch_size in internal_states "
                f"(found {mbs!r})"
            )
        elif asked is not None and mbs != asked:
            problems.append(
                f"{config_id}: effective pp_max_micro_batch_size={mbs}, the matrix asks {asked}"
            )
        elif asked is None and topo.max_running_requests:
            expected = max(topo.max_running_requests // want["pp"], 1)
            if mbs != expected:
                problems.append(
                    f"{config_id}: effective pp_max_micro_batch_size={mbs}, SGLang's default "
                    f"max(max_running_requests // pp, 1) gives {expected}"
                )
        return problems

    def version_of(self, versions: Mapping[str, Any]) -> str | None:
        value = versions.get(self.version_distribution)
        return value if isinstance(value, str) else None


ENGINE = SGLang()
