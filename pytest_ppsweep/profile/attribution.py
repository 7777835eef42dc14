"""Per layout: the median of its stable ranks, the seeds' §9.3 table and deltas vs the baseline.

A rank is *stable* when it made at least half the median number of collective calls of the
layout's ranks (a rank whose profiler started late, stopped early or that never joined the window
would skew the medians); the others are listed, not used.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .trace import KINDS, RankProfile

STABLE_CALLS_FACTOR = 2.0
TABLE_KINDS = ("all_reduce", "send_recv", "all_gather", "reduce_scatter", "all_to_all", "other")


@dataclass(frozen=True)
class LayoutProfile:
    """A layout's attribution: per kind the median over stable ranks of calls, cumulative and
    p50 per call (ms); shares of the window; which ranks were used."""

    config_id: str
    ranks: tuple[RankProfile, ...]
    stable: tuple[str, ...]
    calls: dict[str, float]
    cumulative_ms: dict[str, float]
    p50_ms: dict[str, float]
    window_ms: float
    compute_share: float
    exposed_share: float
    idle_share: float
    overlap_ratio: float

    @property
    def unstable(self) -> tuple[str, ...]:
        return tuple(r.rank for r in self.ranks if r.rank not in self.stable)

    @property
    def non_all_reduce_ms(self) -> float:
        """Cumulative communication other than plain all-reduce (send/recv, waits…)."""
        return sum(v for k, v in self.cumulative_ms.items() if k != "all_reduce")

    def as_dict(self) -> dict[str, Any]:
        return {
            "config_id": self.config_id,
            "ranks": [r.rank for r in self.ranks],
            "stable": list(self.stable),
            "calls": self.calls,
            "cumulative_ms": self.cumulative_ms,
            "p50_ms": self.p50_ms,
            "window_ms": self.window_ms,
            "compute_share": self.compute_share,
            "exposed_share": self.exposed_share,
            "idle_share": self.idle_share,
            "overlap_ratio": self.overlap_ratio,
            "non_all_reduce_ms": self.non_all_reduce_ms,
            "per_rank": [
                {
                    "rank": r.rank,
                    "file": r.path.rsplit("/", 1)[-1],
                    "source": r.source,
                    "window_ms": r.window_ms,
                    "calls": r.calls,
                    "cumulative_ms": r.cumulative_ms,
                    "p50_ms": r.p50_ms,
                    "compute_ms": r.compute_ms,
                    "compute_calls": r.compute_calls,
                    "comm_ms": r.comm_ms,
                    "exposed_ms": r.exposed_ms,
                    "overlap_ratio": r.overlap_ratio,
                }
                for r in self.ranks
            ],
        }


def stable_ranks(ranks: Sequence[RankProfile]) -> list[RankProfile]:
    """Ranks that communicated, with at least half the median number of collective calls."""
    talking = [r for r in ranks if r.total_calls > 0]
    if not talking:
        return []
    mid = statistics.median(r.total_calls for r in talking)
    return [r for r in talking if r.total_calls >= mid / STABLE_CALLS_FACTOR]


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def aggregate(config_id: str, ranks: Sequence[RankProfile]) -> LayoutProfile:
    """The layout's profile: every number the median over its stable ranks."""
    use = stable_ranks(ranks) or list(ranks)
    kinds = [k for k in KINDS if any(k in r.calls for r in use)]
    return LayoutProfile(
        config_id=config_id,
        ranks=tuple(ranks),
        stable=tuple(r.rank for r in stable_ranks(ranks)),
        calls={k: _median([r.calls.get(k, 0) for r in use]) for k in kinds},
        cumulative_ms={k: _median([r.cumulative_ms.get(k, 0.0) for r in use]) for k in kinds},
        p50_ms={k: _median([r.p50_ms[k] for r in use if k in r.p50_ms]) for k in kinds},
        window_ms=_median([r.window_ms for r in use]),
        compute_share=_median([r.share(r.compute_ms) for r in use]),
        exposed_share=_median([r.share(r.exposed_ms) for r in use]),
        idle_share=_median([r.share(r.idle_ms) for r in use]),
        overlap_ratio=_median([r.overlap_ratio for r in use]),
    )


def _delta(value: float, base: float | None) -> float | None:
    if base is None or base == 0:
        return None
    return (value - base) / base


def table_rows(
    layouts: Mapping[str, Mapping[str, Any]], baseline: str | None
) -> list[dict[str, Any]]:
    """The §9.3 table from layouts' :meth:`LayoutProfile.as_dict` (as stored in
    ``profile/<layout>/attribution.json``): one row per layout × kind with calls, cumulative,
    p50, overlap and the window's shares, and deltas vs ``baseline`` (fractions; None without
    the baseline's profile or that kind there)."""
    base = layouts.get(baseline) if baseline else None
    rows = []
    for cid, lp in layouts.items():
        calls, cum, p50 = lp["calls"], lp["cumulative_ms"], lp["p50_ms"]
        for kind in TABLE_KINDS:
            if kind not in calls:
                continue
            b = {"calls": None, "cumulative_ms": None, "p50_ms": None}
            if base is not None:
                b = {key: base[key].get(kind) for key in b}
            rows.append(
                {
                    "config_id": cid,
                    "kind": kind,
                    "calls": calls[kind],
                    "cumulative_ms": round(cum[kind], 3),
                    "p50_ms": round(p50[kind], 4),
                    "overlap_ratio": round(lp["overlap_ratio"], 4),
                    "exposed_share": round(lp["exposed_share"], 4),
                    "compute_share": round(lp["compute_share"], 4),
                    "idle_share": round(lp["idle_share"], 4),
                    "window_ms": round(lp["window_ms"], 3),
                    "ranks": len(lp["ranks"]),
                    "stable_ranks": len(lp["stable"]),
                    "calls_delta": _delta(calls[kind], b["calls"]),
                    "cumulative_delta": _delta(cum[kind], b["cumulative_ms"]),
                    "p50_delta": _delta(p50[kind], b["p50_ms"]),
                    "baseline": baseline if base is not None else "",
                }
            )
    return rows
