"""Whether one measured round is within a workload's SLO, and its goodput.

A round is within the SLO when all of these hold (every failing one is a reason):

* the N/N rule (measure/completion.py, the one home of it): every request completed, none
  failed, the server counted the prompt tokens that were sent;
* every percentile limit: that percentile over the completed requests (bench_serving's
  definitions, measure/metrics.py) is at most the limit;
* with per-request limits: the share of *good* requests (completed and within every per-request
  limit) is at least ``attainment``;
* the client kept to its arrival schedule (measure/arrivals.py): a round the client could not
  offer at the asked rate says nothing about that rate.

Goodput is good requests per (scaled) second of the round. A failed request is never good, and
a round with a failure is never within the SLO, so dropping requests cannot raise either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_ppsweep.matrix.slospec import SloLimit, SloSpec
from pytest_ppsweep.measure.arrivals import Lag, lag
from pytest_ppsweep.measure.completion import result_problems
from pytest_ppsweep.measure.metrics import RoundResult, request_itls, request_tpot

__all__ = ["SloVerdict", "evaluate", "request_values"]


@dataclass(frozen=True)
class SloVerdict:
    """One round against one SLO."""

    within: bool
    reasons: tuple[str, ...]
    good: int
    num_requests: int
    goodput_rps: float  # good requests per scaled second
    observed: Mapping[str, float] = field(default_factory=dict)  # per percentile limit's key
    lag: Lag | None = None

    @property
    def attainment(self) -> float:
        return self.good / self.num_requests if self.num_requests else 0.0


def request_values(rec: Mapping[str, Any], metric: str) -> list[float]:
    """The values one completed record contributes to ``metric`` (TTFT/E2E: one; TPOT: one
    when it has more than one token; ITL: one per inter-token gap)."""
    if not rec.get("ok"):
        return []
    if metric in ("ttft", "e2e"):
        value = rec.get(f"{metric}_s")
        return [] if value is None else [float(value)]
    if metric == "tpot":
        tpot = request_tpot(rec)
        return [] if tpot is None else [tpot]
    return request_itls(rec)


def _percentile(records: Sequence[Mapping[str, Any]], limit: SloLimit) -> float:
    values = [v for r in records for v in request_values(r, limit.metric)]
    return float(np.percentile(values, limit.percentile or 100)) if values else math.nan


def _good(rec: Mapping[str, Any], limits: Sequence[SloLimit]) -> bool:
    if not rec.get("ok"):
        return False
    for lim in limits:
        values = request_values(rec, lim.metric)
        if lim.metric in ("ttft", "e2e") and not values:
            return False  # completed without a time: cannot be shown to meet it
        if values and max(values) > lim.limit_s:
            return False  # a 1-token answer has no TPOT/ITL, as bench_serving's goodput
    return True


def evaluate(result: RoundResult, slo: SloSpec) -> SloVerdict:
    """The verdict of ``result`` (a measured round with its records) against ``slo``."""
    records = list(result.records)
    reasons = [str(p) for p in result_problems(result)]
    observed: dict[str, float] = {}
    for lim in slo.percentile_limits:
        value = observed[lim.key] = _percentile(records, lim)
        if math.isnan(value):
            reasons.append(f"{lim}: nothing measured")
        elif value > lim.limit_s:
            reasons.append(f"{lim}: measured {value:.3g} s")
    good = sum(_good(r, slo.request_limits) for r in records)
    total = result.num_requests
    if slo.request_limits and total and good / total < slo.attainment:
        reasons.append(f"{good}/{total} requests within "
                       f"{' and '.join(str(x) for x in slo.request_limits)} "
                       f"(need {slo.attainment:.0%})")
    behind = lag(records, result.time_scale)
    if behind is not None and behind.behind:
        reasons.append(behind.text())
    duration = result.duration_s
    return SloVerdict(
        within=not reasons, reasons=tuple(reasons), good=good, num_requests=total,
        goodput_rps=good / duration if duration > 0 else math.nan, observed=observed,
        lag=behind,
    )
