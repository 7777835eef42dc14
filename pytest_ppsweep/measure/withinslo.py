"""Whether one measured round is within a workload's SLO, and its goodput.

A round is within the SLO when all of these hold (every failing one is a reason):

* the N/N rule (measure/completion.py, the one home of it): every request completed, none
  failed, the server counted the prompt tokens that were sent;
* every percentile limit is *proven*: "p<q> ≤ L" says that at most a share 1 − q/100 of the
  requests exceed L. With k of n requests over L, the one-sided Clopper-Pearson upper bound of
  that share at the SLO's ``confidence`` (default 95 %) must be within the allowance, as MLPerf
  LoadGen's early stopping bounds a latency percentile. When the lower bound is above the
  allowance the limit is missed; in between the probe is *unproven*, and an unproven probe is
  not within (the search treats it as outside: the capacity found is one the data shows).
  Requests of one probe are not independent: a queue that is long stays long, so the requests
  over the limit come in runs and their share varies more than a binomial's. The bound is taken
  over the *effective* number of requests: ``n / φ`` (and ``k / φ`` over), where the dispersion
  φ (:func:`dispersion`, at least 1) is measured on the probe itself by batch means: the
  requests in arrival order cut into batches of ⌊√n⌋, φ = the variance of the batches' shares
  over the binomial's for that batch size. A probe whose effective requests are too few to prove
  the limit is unproven, not within. φ cannot be seen where every request or none is over the
  limit (it is 1 there), nor beyond the batch size (a run longer than ⌊√n⌋ requests is seen
  only in part): it is the least the probe itself shows. (stats/capacity.py measures the
  dispersion across probes for the capacity's interval; this is the one probe's own.)
  :func:`min_requests` is the fewest independent requests that can prove a percentile with
  none over it (p50: 5, p90: 29, p99: 299 at 95 %). The observed percentile (bench_serving's
  definitions,
  measure/metrics.py) is reported beside it. Both are taken over the requests between the
  warm-up and the drain: the SLO's ``trim`` share (default 10 %) of the requests at each end, by
  arrival, is left out (the first meet an empty queue, the last have no arrivals behind them);
  the N/N rule and goodput count every request;
* with per-request limits: the share of *good* requests (completed and within every per-request
  limit) is at least ``attainment``;
* the client kept to its arrival schedule (measure/arrivals.py): a round the client could not
  offer at the asked rate says nothing about that rate;
* a rate probe did not overload the server (measure/overload.py: at or above the layout's
  saturation rate, a delivered rate short of the offered one beyond its noise, or waits that
  grow through the probe). An overloaded probe is never within, and its counts over each
  percentile limit are recorded as every judged request over it: its queue has no steady state,
  whose share over any limit is 1 (so the capacity fit, stats/capacity.py, sees it outside).

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
from pytest_ppsweep.measure.overload import Overload
from pytest_ppsweep.measure.overload import overload as overload_of
from pytest_ppsweep.stats.binomial import binomial_bounds, dispersion, min_requests

__all__ = ["SloVerdict", "evaluate", "judge_percentile", "request_values", "steady"]


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
    unproven: tuple[str, ...] = ()  # the percentile limits the data could not prove either way
    # per percentile limit's key: (requests over the limit, requests judged), what the capacity
    # estimate (stats/capacity.py) fits across the probes
    over: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    overload: Overload | None = None  # a rate probe's overload tests (measure/overload.py)

    @property
    def overloaded(self) -> bool:
        return self.overload is not None and self.overload.overloaded

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


def _values(records: Sequence[Mapping[str, Any]], limit: SloLimit) -> list[float]:
    return [v for r in records for v in request_values(r, limit.metric)]


def _percentile(records: Sequence[Mapping[str, Any]], limit: SloLimit) -> float:
    values = _values(records, limit)
    return float(np.percentile(values, limit.percentile or 100)) if values else math.nan


def judge_percentile(values: Sequence[float], limit: SloLimit,
                     confidence: float) -> tuple[str, str]:
    """("within" | "outside" | "unproven", the words) for one percentile limit; ``values`` in
    the requests' arrival order (their dispersion is measured in it)."""
    n = len(values)
    flags = [v > limit.limit_s for v in values]
    over = sum(flags)
    phi = dispersion(flags)
    # the effective counts: n / φ requests, k / φ of them over (rounded; never below 1 of 1)
    n_eff = max(1, round(n / phi)) if n else 0
    k_eff = min(n_eff, round(over / phi))
    allowed = 1.0 - (limit.percentile or 100) / 100.0
    lower, upper = binomial_bounds(k_eff, n_eff, confidence)
    share = (f"{over} of {n} requests over {limit.limit_s:g} s; the share over it is "
             f"{lower:.2f}-{upper:.2f} at {confidence:.0%} confidence, {allowed:.2f} allowed")
    if phi > 1.0:
        share += (f"; dispersion {phi:.1f} (batch means): the {n} requests count as {n_eff} "
                  "independent ones")
    if upper <= allowed:
        return "within", share
    if lower > allowed:
        return "outside", share
    need = min_requests(limit.percentile or 100, confidence)
    return "unproven", share + (
        (f" (at least {need} requests are needed to prove it" + (
            f"; about {math.ceil(need * phi)} at this dispersion)" if phi > 1.0 else ")"))
        if n_eff < need else "")


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


def steady(records: Sequence[Mapping[str, Any]], trim: float) -> list[Mapping[str, Any]]:
    """The records between the warm-up and the drain: ``trim`` of them at each end left out,
    ordered by when they were due (else sent, else their index)."""
    def due(r: Mapping[str, Any]) -> float:
        for key in ("scheduled_at_s", "sent_at_s"):
            if r.get(key) is not None:
                return float(r[key])
        return float(r.get("index") or 0)

    ordered = sorted(records, key=due)
    cut = math.floor(len(ordered) * trim)
    return ordered[cut:len(ordered) - cut] if cut and len(ordered) > 2 * cut else ordered


def evaluate(result: RoundResult, slo: SloSpec, load: float | None = None,
             saturation_rps: float | None = None) -> SloVerdict:
    """The verdict of ``result`` (a measured round with its records) against ``slo``; for a
    rate probe, ``load`` (its asked req/s) and the layout's ``saturation_rps`` (None: not
    measured) add the overload tests (measure/overload.py)."""
    records = list(result.records)
    judged = steady(records, slo.trim)
    reasons = [str(p) for p in result_problems(result)]
    observed: dict[str, float] = {}
    unproven: list[str] = []
    over: dict[str, tuple[int, int]] = {}
    for lim in slo.percentile_limits:
        value = observed[lim.key] = _percentile(judged, lim)
        if math.isnan(value):
            reasons.append(f"{lim}: nothing measured")
            continue
        values = _values(judged, lim)
        over[lim.key] = (sum(v > lim.limit_s for v in values), len(values))
        state, words = judge_percentile(values, lim, slo.confidence)
        if state == "outside":
            reasons.append(f"{lim}: measured {value:.3g} s ({words})")
        elif state == "unproven":
            unproven.append(lim.key)
            reasons.append(f"{lim}: unproven: measured {value:.3g} s ({words})")
    good = sum(_good(r, slo.request_limits) for r in records)
    total = result.num_requests
    if slo.request_limits and total and good / total < slo.attainment:
        reasons.append(f"{good}/{total} requests within "
                       f"{' and '.join(str(x) for x in slo.request_limits)} "
                       f"(need {slo.attainment:.0%})")
    behind = lag(records, result.time_scale)
    if behind is not None and behind.behind:
        reasons.append(behind.text())
    tests = (overload_of(records, load, saturation_rps, slo.trim)
             if slo.search == "rate" and load is not None else None)
    if tests is not None and tests.overloaded:
        reasons.extend(tests.reasons())
        over = {key: (n, n) for key, (_, n) in over.items()}
    duration = result.duration_s
    return SloVerdict(
        within=not reasons, reasons=tuple(reasons), good=good, num_requests=total,
        goodput_rps=good / duration if duration > 0 else math.nan, observed=observed,
        lag=behind, unproven=tuple(unproven), over=over, overload=tests,
    )
