"""One torch-profiler Chrome trace (gzipped or not) → what one rank spent its window on.

Which events count (names read from real traces, tests/data/traces/):

* GPU: NCCL kernels, ``ncclDevKernel_<Op>_…`` / ``ncclKernel_<Op>_…`` (``cat = "kernel"``); every
  other kernel is compute. A kernel whose name carries no op (NCCL ≥ 2.19's
  ``ncclDevKernel_Generic_1``, used by real SGLang traces on GPUs) takes the kind of its
  ``Collective name`` argument, else of the CPU-side collective (``record_param_comms``,
  ``nccl:<op>``, ``c10d::<op>``) that encloses its launch (``cudaLaunchKernel`` or, as torch
  2.11 records it, ``cuLaunchKernelEx`` with the same ``correlation``); a launch under
  ``nccl:coalesced`` (``batch_isend_irecv``, grouped calls) takes the one kind of the ops queued
  just before it (``c10d::send``/``c10d::recv_``). Otherwise CPU-side ops only name kernels; they
  are not time. ``gpu_memset``/``gpu_memcpy`` events and the GPU-side ``gpu_user_annotation``
  copies of ``nccl:<op>`` are not kernels. Per compute kernel name: count and summed time
  (``RankProfile.compute_kernels``). Real GPU shapes: tests/data/h200-1gpu/ (torch 2.11, NCCL
  2.28.9 on an H200).
* CPU (gloo): the work of a collective is the ``gloo:<op>`` annotation (``gloo:all_reduce``,
  ``gloo:all_gather``, ``gloo:send``, ``gloo:recv``, ``gloo:barrier``), on a gloo worker thread or
  inline. ``c10d::<op>`` (``c10d::allreduce_``, ``c10d::send``, ``c10d::recv_``…) is only the
  enqueue on the caller's thread: counted only when a trace has no ``gloo:`` event, and
  ``record_param_comms`` (NCCL's CPU marker) likewise, by its ``Collective name``. Compute is the
  ``aten::`` ops outside any collective of their thread.

Kinds: all_reduce, all_gather, reduce_scatter, all_to_all, send_recv (point-to-point: the PP
hand-off), other (barrier, broadcast…). Plain all-reduce is never mixed with send/recv and the
waits around it, as the seeds insist (§9.3).
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv", "other")
NCCL_PREFIXES = ("ncclDevKernel_", "ncclKernel_")
_OPS = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherbase": "all_gather",
    "allgatherintocoalesced": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallbase": "all_to_all",
    "sendrecv": "send_recv",
    "send": "send_recv",
    "recv": "send_recv",
    "recvanysource": "send_recv",
}
_RANK_IN_NAME = re.compile(r"((?:TP|DP|PP|EP)-\d+(?:-(?:TP|DP|PP|EP)-\d+)*)")


class TraceError(ValueError):
    """A trace that cannot be read or parsed; the message names the file."""


def kind_of(op: str) -> str:
    """The kind of a collective from its op name (``all_reduce``, ``AllReduce``, ``allreduce_``)."""
    key = re.sub(r"[^a-z]", "", op.lower())
    return _OPS.get(key, "other")


def collective(event: dict[str, Any], *, gpu: bool) -> str | None:
    """The kind of ``event`` when it is a collective of the trace's side, else None."""
    name = str(event.get("name", ""))
    if gpu:
        if event.get("cat") != "kernel":
            return None
        for prefix in NCCL_PREFIXES:
            if name.startswith(prefix):
                return kind_of(name[len(prefix) :].split("_", 1)[0].split("(", 1)[0])
        return None
    if name.startswith("gloo:"):
        return kind_of(name[5:])
    return None


def _fallback(event: dict[str, Any]) -> str | None:
    name = str(event.get("name", ""))
    if name.startswith("nccl:"):
        return kind_of(name[5:])
    if name.startswith("c10d::"):
        return kind_of(name[6:])
    if name == "record_param_comms":
        args = event.get("args") or {}
        return kind_of(str(args.get("Collective name", "")))
    return None


@dataclass(frozen=True)
class RankProfile:
    """One rank's window: collectives by kind and how communication sat against compute.

    Times in milliseconds. ``comm_ms`` is the union of communication intervals (what the rank
    spent communicating), ``overlap_ms`` the part of it that compute covered; ``exposed_ms`` =
    comm − overlap. compute + exposed + idle = window.
    """

    path: str
    rank: str
    source: str  # "gpu" (NCCL kernels) | "cpu" (gloo / c10d)
    window_ms: float
    calls: dict[str, int]
    cumulative_ms: dict[str, float]
    p50_ms: dict[str, float]
    compute_ms: float
    comm_ms: float
    overlap_ms: float
    durations_ms: dict[str, list[float]] = field(default_factory=dict, repr=False)
    compute_kernels: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False)

    @property
    def compute_calls(self) -> int:
        """Compute kernels (GPU) / ``aten::`` ops outside collectives (CPU) in the window."""
        return sum(n for n, _ms in self.compute_kernels.values())

    @property
    def exposed_ms(self) -> float:
        return max(self.comm_ms - self.overlap_ms, 0.0)

    @property
    def idle_ms(self) -> float:
        return max(self.window_ms - self.compute_ms - self.exposed_ms, 0.0)

    @property
    def overlap_ratio(self) -> float:
        """Share of communication time that compute overlapped (0: fully exposed)."""
        return self.overlap_ms / self.comm_ms if self.comm_ms > 0 else 0.0

    def share(self, ms: float) -> float:
        return ms / self.window_ms if self.window_ms > 0 else 0.0

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


def read_events(path: Path) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a Chrome trace file (gzip detected by its magic bytes)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the trace: {exc.strerror or exc}") from None
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except (OSError, EOFError, ValueError) as exc:
        raise TraceError(f"{path}: not a Chrome trace (JSON, gzipped or not): {exc}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(
            f"{path}: not a Chrome trace: expected a 'traceEvents' list, found "
            f"{type(events).__name__}"
        )
    return [e for e in events if isinstance(e, dict)]


def rank_label(path: Path) -> str:
    """``TP-1-PP-0`` from SGLang's ``<prefix>-<id>-TP-1-PP-0.trace.json.gz``; else the stem."""
    found = _RANK_IN_NAME.findall(path.name)
    return found[-1] if found else path.name.split(".")[0]


def _span(e: dict[str, Any]) -> tuple[float, float] | None:
    try:
        ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
    except (KeyError, TypeError, ValueError):
        return None
    return ts, ts + max(dur, 0.0)


def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, merged intervals."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def length(intervals: Sequence[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def intersection(x: Sequence[tuple[float, float]], y: Sequence[tuple[float, float]]) -> float:
    """Length of the intersection of two merged interval lists."""
    i = j = 0
    total = 0.0
    while i < len(x) and j < len(y):
        lo, hi = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if hi > lo:
            total += hi - lo
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return total


def _inside(merged: list[tuple[float, float]], starts: list[float], a: float, b: float) -> bool:
    """Whether [a, b] lies inside one interval of ``merged`` (disjoint, sorted)."""
    k = bisect.bisect_right(starts, a) - 1
    return k >= 0 and merged[k][1] >= b


def _coalesced_kind(ops: list[tuple[float, float, str, str]], i: int) -> str:
    """The kind of a coalesced group (``nccl:coalesced``: torch's ``batch_isend_irecv`` and other
    grouped calls launch their kernel under it): the one kind of the ops queued on its thread
    after the previous ``nccl:`` launch (``record_param_comms`` send/recv, ``c10d::send``…);
    ``other`` when they are of several kinds or none."""
    start = ops[i][0]
    kinds = set()
    for _a, b, kind, name in reversed(ops[:i]):
        if b > start:  # encloses the group: not one of its members
            continue
        if name.startswith("nccl:"):
            break
        if kind != "other":
            kinds.add(kind)
    return kinds.pop() if len(kinds) == 1 else "other"


def _launch_kinds(spans: list[tuple[dict[str, Any], tuple[float, float]]]) -> dict[Any, str]:
    """correlation id → the kind of the CPU-side collective whose span encloses that launch."""
    named: dict[Any, list[tuple[float, float, str, str]]] = {}
    for e, (a, b) in spans:
        if e.get("cat") != "kernel" and (op := _fallback(e)) is not None:
            named.setdefault((e.get("pid"), e.get("tid")), []).append(
                (a, b, op, str(e.get("name", ""))))
    ops: dict[Any, list[tuple[float, float, str]]] = {}
    for tid, v in named.items():
        v.sort()
        ops[tid] = [(a, b, _coalesced_kind(v, i) if name.endswith("coalesced") else kind)
                    for i, (a, b, kind, name) in enumerate(v)]
    starts = {t: [a for a, _b, _k in v] for t, v in ops.items()}
    out: dict[Any, str] = {}
    for e, (a, b) in spans:
        if e.get("cat") not in ("cuda_runtime", "cuda_driver"):
            continue
        corr = (e.get("args") or {}).get("correlation")
        tid = (e.get("pid"), e.get("tid"))
        if corr is None or tid not in ops:
            continue
        i = bisect.bisect_right(starts[tid], a) - 1
        while i >= 0:  # the innermost enclosing op (nesting is shallow)
            _lo, hi, kind = ops[tid][i]
            if hi >= b:
                out[corr] = kind
                break
            i -= 1
    return out


def _gpu_kind(event: dict[str, Any], kind: str, launches: dict[Any, str]) -> str:
    """A NCCL kernel's kind, resolved for kernels whose name carries no op."""
    if kind != "other":
        return kind
    args = event.get("args") or {}
    if args.get("Collective name"):
        return kind_of(str(args["Collective name"]))
    return launches.get(args.get("correlation"), kind)


def parse(path: Path) -> RankProfile:
    """Attribute one rank's trace (see the module docstring for the events that count)."""
    events = [e for e in read_events(path) if e.get("ph") == "X"]
    spans = [(e, s) for e in events if (s := _span(e)) is not None]
    if not spans:
        raise TraceError(f"{path}: the trace has no complete ('X') event")
    gpu = any(e.get("cat") == "kernel" for e, _ in spans)
    comm = [(e, s, k) for e, s in spans if (k := collective(e, gpu=gpu)) is not None]
    if gpu and any(k == "other" for _e, _s, k in comm):
        launches = _launch_kinds(spans)
        comm = [(e, s, _gpu_kind(e, k, launches)) for e, s, k in comm]
    if not gpu and not comm:
        comm = [(e, s, k) for e, s in spans if (k := _fallback(e)) is not None]
    named: list[tuple[str, tuple[float, float]]] = []
    if gpu:
        named = [
            (str(e.get("name", "")), s) for e, s in spans
            if e.get("cat") == "kernel" and collective(e, gpu=True) is None
        ]
        compute = [s for _n, s in named]
    else:
        by_tid: dict[Any, list[tuple[float, float]]] = {}
        for e, s, _k in comm:
            by_tid.setdefault((e.get("pid"), e.get("tid")), []).append(s)
        sorted_tid = {t: union(v) for t, v in by_tid.items()}
        starts = {t: [a for a, _ in v] for t, v in sorted_tid.items()}
        compute = []
        for e, s in spans:
            if not str(e.get("name", "")).startswith("aten::"):
                continue
            tid = (e.get("pid"), e.get("tid"))
            if tid in sorted_tid and _inside(sorted_tid[tid], starts[tid], *s):
                continue
            compute.append(s)
            named.append((str(e.get("name", "")), s))
    lo = min(a for _, (a, _b) in spans)
    hi = max(b for _, (_a, b) in spans)
    durations: dict[str, list[float]] = {}
    for _e, (a, b), k in comm:
        durations.setdefault(k, []).append((b - a) / 1e3)
    kernels: dict[str, tuple[int, float]] = {}
    for name, (a, b) in named:
        n, ms = kernels.get(name, (0, 0.0))
        kernels[name] = (n + 1, ms + (b - a) / 1e3)
    comm_u = union(s for _e, s, _k in comm)
    compute_u = union(compute)
    return RankProfile(
        path=str(path),
        rank=rank_label(path),
        source="gpu" if gpu else "cpu",
        window_ms=(hi - lo) / 1e3,
        calls={k: len(v) for k, v in durations.items()},
        cumulative_ms={k: sum(v) for k, v in durations.items()},
        p50_ms={k: statistics.median(v) for k, v in durations.items()},
        compute_ms=length(compute_u) / 1e3,
        comm_ms=length(comm_u) / 1e3,
        overlap_ms=intersection(comm_u, compute_u) / 1e3,
        durations_ms=durations,
        compute_kernels=kernels,
    )


def trace_files(folder: Path) -> list[Path]:
    """The Chrome traces under ``folder`` (``*.json`` / ``*.json.gz``), sorted."""
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))
        and "trace" in p.name
    )
