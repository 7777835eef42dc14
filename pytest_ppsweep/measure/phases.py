"""Where a layout's cluster time goes: each step of its lifecycle, timed.

:class:`PhaseClock` adds up the real seconds (on the emulator too) that one process spent on each
phase of each layout (:data:`PHASES`) and the wall-clock span from the layout's first step to its
last; :meth:`PhaseClock.row` is what ``metadata/phases.json`` keeps per layout (written by the
sweep run when the layout is torn down; benchmarks/bench_orchestration.py reads it). ``boot``
and ``round`` are the work itself (every rank healthy; the measured requests of each round);
the other phases are the orchestration around them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

PHASES = (
    "launch",  # starting every rank (until the boot wait begins)
    "boot",  # the boot wait: until every rank answers /health (service.boot_s)
    "server info",  # /server_info, topology, the run folder's records after health
    "round",  # the measured requests of each round (duration_raw_s)
    "warm-up",  # the warm-up requests before each round
    "flush",  # the rest of a round's call: event loop and session, /flush_cache, tallies
    "results",  # each round's row written (fsync) and its progress line
    "snapshots",  # nvidia-smi on every node (before, healthy, after, cleaned; the healthy one
    # runs alongside the server info: the two may add up to more than the wall time they took)
    "log scan",  # every rank log scanned after the tests
    "teardown",  # every rank stopped
)
WORK = ("boot", "round")  # the cluster time a sweep cannot do without


class PhaseClock:
    """Seconds per layout and phase, plus each layout's first start and last end (epoch)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, dict[str, float]] = {}
        self._span: dict[str, list[float]] = {}

    def add(self, config_id: str, phase: str, seconds: float) -> None:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; expected one of {', '.join(PHASES)}")
        with self._lock:
            row = self._seconds.setdefault(config_id, {})
            row[phase] = row.get(phase, 0.0) + max(0.0, seconds)

    def mark(self, config_id: str, start: float, end: float) -> None:
        """The layout was busy from ``start`` to ``end`` (``time.time()``)."""
        with self._lock:
            span = self._span.setdefault(config_id, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)

    @contextlib.contextmanager
    def timed(self, config_id: str, phase: str) -> Iterator[None]:
        """Adds the block's duration to ``phase`` of ``config_id`` (also when it raises)."""
        wall, t0 = time.time(), time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - t0
            self.add(config_id, phase, took)
            self.mark(config_id, wall, wall + took)

    def row(self, config_id: str) -> dict[str, float]:
        """``{phase: seconds, …, "start": epoch, "end": epoch}`` of one layout (rounded)."""
        with self._lock:
            row = {p: round(s, 4) for p, s in self._seconds.get(config_id, {}).items()}
            if config_id in self._span:
                row["start"], row["end"] = (round(t, 4) for t in self._span[config_id])
        return row


def warmup_span(records: Iterable[Mapping[str, Any]]) -> float:
    """Real seconds from the first warm-up request sent to the last one ended."""
    spans = [
        (float(r["send_ts"]), float(r["send_ts"]) + float(r["e2e_raw_s"]))
        for r in records
        if r.get("send_ts") is not None and r.get("e2e_raw_s") is not None
    ]
    if not spans:
        return 0.0
    return max(end for _s, end in spans) - min(start for start, _e in spans)


def totals(rows: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Seconds per phase over every layout of ``metadata/phases.json``."""
    out = dict.fromkeys(PHASES, 0.0)
    for row in rows.values():
        for phase in PHASES:
            out[phase] += float(row.get(phase, 0.0))
    return out
