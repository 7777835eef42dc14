"""What every engine offers: the :class:`Engine` Protocol and the plain data it answers with.

The engine sits below the sweep file's model: it takes plain values (ints, mappings of server
arguments, strings) and returns plain values, so that matrix/ can ask it (the flags the plugin
owns, the layout rewrite) and every later step can too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Topology:
    """What the server says it runs (rank 0's view), in the engine's words translated to the
    plugin's: the layout, the MoE backends, the effective micro-batch cap, the request cap, the
    KV capacity and the version."""

    pp: int | None
    tp: int | None
    ep: int | None
    nnodes: int | None
    moe_runner_backend: str | None
    moe_a2a_backend: str | None
    pp_max_micro_batch_size: int | None  # the effective value
    max_running_requests: int | None
    version: str | None
    simulated: bool
    time_scale: float
    dp: int | None = None
    max_total_tokens: int | None = None  # the KV cache's capacity in tokens


@dataclass(frozen=True)
class GreedyAnswer:
    """A greedy generation's answer: the generated token ids, each one's logprob, and the top
    logprobs at each position as (token id, logprob), best first."""

    ids: tuple[int, ...]
    logprobs: tuple[float | None, ...]
    top: tuple[tuple[tuple[int, float], ...], ...]


@dataclass(frozen=True)
class StreamEvent:
    """One event of the engine's native streaming generation, in the load generator's words:
    ``fields`` the record's numbers it carries (prompt_tokens, completion_tokens,
    cached_tokens, server_e2e_latency, server_first_token_latency), ``finish`` the finish
    reason's (kind, detail) when it ends the stream, ``text`` whether it carried text."""

    fields: dict[str, Any]
    finish: tuple[Any, Any] | None
    text: bool


@dataclass(frozen=True)
class Endpoints:
    """The HTTP paths of the engine's API the plugin calls (each begins with ``/``)."""

    health: str
    generate: str  # the native generation (greedy outputs, logprobs)
    completions: str  # the OpenAI-compatible completions
    models: str  # the OpenAI-compatible model list (the served model's name)
    flush_cache: str
    start_profile: str
    stop_profile: str
    server_info: tuple[str, ...]  # tried in order: a 404 falls through to the next
    metrics: str


@dataclass(frozen=True)
class Knobs:
    """The names of the server arguments the plugin reasons about (a sweep's ``[server]`` key,
    an axis name): what each concept is called by this engine. A knob the engine lacks is ""."""

    chunk: str  # the prefill chunk size (tokens)
    micro_batch: str  # the pipeline's micro-batch cap
    moe_a2a: str  # the MoE all-to-all backend
    moe_runner: str  # the MoE kernel backend
    mem_fraction: str  # the static memory fraction
    max_running: str  # the cap on running requests
    decode_graph_off: str  # switches off the decode CUDA graphs
    profile_request: str  # what the profile window's request is called (messages)


class Engine(Protocol):
    """One serving engine: everything the plugin must know of it. The registry
    (engine/engines.py) maps the sweep's ``[sweep] engine`` name to one."""

    @property
    def name(self) -> str:
        """The name a sweep file gives (``[sweep] engine``), stored in run.json."""

    @property
    def legacy_version_key(self) -> str:
        """The run.json key run folders of format ≤ 2 wrote this engine's version under ("":
        none; folder/runfolder.py reads it as ``engine_version``)."""

    @property
    def server_module(self) -> str:
        """The Python module a rank runs (``python -m <module>``) unless a cluster names one."""

    @property
    def version_distribution(self) -> str:
        """The Python distribution whose version is the engine's version."""

    @property
    def owned_flags(self) -> frozenset[str]:
        """The server arguments the plugin derives from the layout and the cluster: a sweep
        file must not set them."""

    @property
    def endpoints(self) -> Endpoints: ...

    @property
    def knobs(self) -> Knobs: ...

    @property
    def axis_short(self) -> Mapping[str, str]:
        """Short names of server-argument axes in point ids (``chunk16k``)."""

    @property
    def ep_spanning_a2a(self) -> tuple[str, ...]:
        """The MoE all-to-all backends with which the engine runs EP = TP."""

    @property
    def milestones(self) -> tuple[str, ...]:
        """The boot milestones a rank logs, in order (the matched text is shown)."""

    @property
    def fatal_patterns(self) -> Mapping[str, str]:
        """The engine's own fatal log lines: the log scan's kind → a regular expression (merged
        with the generic patterns of that kind, service/logscan.py)."""

    @property
    def emulator_banner(self) -> str:
        """A regular expression of the emulator's first log line, its time scale in group 1."""

    def server_flags(self, server: Mapping[str, Any]) -> list[str]:
        """A sweep's server arguments (``{"disable_radix_cache": True}``) as command-line
        flags."""

    def flag_of(self, key: str) -> str:
        """The command-line flag of a server argument (``chunked_prefill_size``)."""

    def layout_flag(self, axis: str) -> str:
        """The command-line flag of a layout size (``pp``, ``tp``, ``ep``)."""

    def rank_argv(self, *, python: str, module: str, model_path: str, pp: int, tp: int, ep: int,
                  nnodes: int, node_rank: int, dist_init: str, host: str, port: int,
                  server: Mapping[str, Any], dp: int = 1) -> list[str]:
        """The argv of one node's rank (``dp``: the server's data-parallel replicas)."""

    @property
    def router_module(self) -> str:
        """The Python module that runs the engine's P/D router (``python -m <module>``); ""
        when the engine has no P/D layouts (the sweep file's parser refuses them)."""

    @property
    def router_policies(self) -> tuple[str, ...]:
        """The router's policies of spreading requests over a role's servers, its default
        first (a sweep's ``[router] policy`` is one of them)."""

    @property
    def transfer_backends(self) -> tuple[str, ...]:
        """The KV transfer backends between prefill and decode servers, the default first
        (``[sweep] transfer_backend`` is one of them)."""

    def role_flags(self, role: str, *, bootstrap_port: int, transfer_backend: str
                   ) -> dict[str, Any]:
        """The server arguments a server of ``role`` takes for its role, as a sweep's
        ``[server]`` writes them: none for ``serve``; a ``prefill`` or ``decode`` server's mode
        and transfer backend, a prefill server's bootstrap port (``bootstrap_port``; a decode
        server learns its peer's from the router). ValueError for a role the engine does not
        run."""

    def router_argv(self, *, python: str, host: str, port: int,
                    prefill: Sequence[tuple[str, int]], decode: Sequence[str], policy: str,
                    flags: Mapping[str, Any]) -> list[str]:
        """The argv of a P/D layout's router, bound to ``host``:``port``: ``prefill`` each
        prefill server's (URL, bootstrap port), ``decode`` each decode server's URL, in start
        order; ``policy`` one of :attr:`router_policies`; ``flags`` further router arguments.
        ValueError for an engine with no P/D router."""

    @property
    def router_fatal_patterns(self) -> Mapping[str, str]:
        """kind → regex of the lines in the router's log that mean it failed (its log has
        neither a server's lines nor its failures)."""

    @property
    def router_ready_path(self) -> str:
        """The router's readiness endpoint (GET), read by :meth:`router_unready`."""

    def router_unready(self, status: int, body: bytes, workers: int) -> str | None:
        """Why the router is not ready to route yet, from its readiness endpoint's answer
        (``status``, ``body``) when ``workers`` servers are behind it; None: ready."""

    def flags_argv(self, python: str, module: str) -> list[str]:
        """The command that prints the server module's argument list where the engine runs
        (cluster/serverflags.py reads it back: the flag check against the engine's parser)."""

    def profile_request(self, *, output_dir: str, activities: Sequence[str], prefix: str,
                        profile_id: str, num_steps: int) -> dict[str, Any]:
        """The body of the profile window's start request."""

    def stream_request(self, ids: list[int], *, max_new_tokens: int) -> dict[str, Any]:
        """The native API's streaming greedy body of one prompt (``ignore_eos``: exactly
        ``max_new_tokens`` tokens), sent to ``endpoints.generate``."""

    def stream_event(self, event: dict[str, Any]) -> StreamEvent:
        """One parsed ``data:`` event of that stream; a field of the wrong type raises
        TypeError (a bad stream)."""

    def greedy_request(self, prompt: str | Sequence[int], *, max_new_tokens: int,
                       top_logprobs: int) -> dict[str, Any]:
        """The body of one greedy generation with its logprobs (the outputs probe), sent to
        ``endpoints.generate``."""

    def prefix_counters(self, metrics: str) -> tuple[float, float] | None:
        """The server's cumulative (cached prompt tokens, prompt tokens) from the text of its
        ``endpoints.metrics`` page, every label set summed: a round's prefix hit rate is their
        deltas' ratio. None when the page holds no such counters (metrics off, or an engine
        whose counters are not verified)."""

    def greedy_answer(self, answer: Any) -> GreedyAnswer | str:
        """That generation's answer (parsed JSON), or why it cannot be read."""

    def node_ranks(self, pp: int, tp: int, nnodes: int, node: int) -> list[tuple[int, int]]:
        """The (pp_rank, tp_rank) pairs the engine places on node ``node``."""

    def trace_rank_name(self, pp_rank: int, tp_rank: int, pp: int) -> str:
        """What a rank's profiler trace file is named after."""

    def trace_rank_of(self, filename: str, pp: int) -> tuple[int, int] | None:
        """(pp_rank, tp_rank) of a trace file name; None when it is not a rank's trace."""

    def rank_identity(self, argv: Sequence[str]) -> tuple[str | None, str | None, bool]:
        """(host, port, whether it is node 0's rank) of a rank's argv as found running; the
        rendezvous address is compared by :meth:`rendezvous_of`."""

    def rendezvous_of(self, argv: Sequence[str]) -> str | None:
        """The rendezvous address (``host:port``) a rank's argv names, or None."""

    def effective_ep(self, tp: int, ep: int, server: Mapping[str, Any],
                     spanning: Sequence[str]) -> int:
        """The EP that runs when ``ep`` is asked (the engine may rewrite it)."""

    def logged_server_info(self, log: Iterable[str], metrics: str) -> dict[str, Any]:
        """The server info of an engine that serves none (``endpoints.server_info`` empty),
        from rank 0's boot log and its ``endpoints.metrics`` text; what :meth:`topology`
        reads. An engine with an info endpoint is never asked."""

    def topology(self, info: Mapping[str, Any]) -> Topology:
        """The server info (the engine's JSON) as a :class:`Topology`."""

    def topology_problems(self, config_id: str, want: Mapping[str, int],
                          server: Mapping[str, Any], topo: Topology) -> list[str]:
        """What the server reports against what was asked: ``want`` holds pp, tp, ep and
        nnodes; ``server`` the sweep's server arguments of the point."""

    def version_of(self, versions: Mapping[str, Any]) -> str | None:
        """The engine's version from the node's version probe (cluster/nodeinfo.py)."""


def counter_sum(metrics: str, name: str) -> float | None:
    """The sum over every label set of counter ``name`` in a Prometheus text page (its
    ``name`` samples, ``name{...} value``); 0.0 when the page declares the family
    (``# TYPE``) with no sample yet, None when it does not know it."""
    family = name.removesuffix("_total")
    total, seen = 0.0, False
    for line in metrics.splitlines():
        if line.startswith("#"):
            parts = line.split()
            seen = seen or (len(parts) >= 3 and parts[1] == "TYPE" and parts[2] in (family, name))
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{", 1)[0].strip() == name:
            try:
                total += float(value)
            except ValueError:
                continue
            seen = True
    return total if seen else None


def json_number(obj: Mapping[str, Any], key: str) -> Any:
    """``obj[key]`` when it is a number or absent (None); a wrong type raises TypeError (a stream
    event's or a server info's field, read by every engine and the load generator)."""
    value = obj.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise TypeError(f"{key} is {type(value).__name__} {str(value)[:50]!r}, not a number")
    return value


def json_object(value: Any, what: str) -> dict[str, Any]:
    """``value`` as a JSON object ({} for None); anything else raises TypeError naming ``what``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{what} is {type(value).__name__}, not an object")
    return value
