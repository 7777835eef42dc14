"""Whether an open-loop SLO probe overloaded the server: the arrivals came faster than it
served them, so its queue grew for the whole probe and the latencies it measured are those of a
queue still filling, not of any steady state. Pure: records in, a verdict out.

Why it matters. A short probe above the layout's capacity ends before its queue is long: seven
requests at 1.4 req/s into a server of 0.54 req/s wait at most a few service times, and a
lenient TTFT limit (20 s) is met by every one, yet the load cannot be carried (the queue grows
without bound). Such a probe says nothing about a steady state, so it is never within the SLO.
Three tests, any one of which makes a probe ``overloaded`` (each a reason):

* **the saturation rule**: the probe's load is at or above the layout's *saturation rate*, the
  most requests per second it served in its closed-loop rounds of this run (run/slo_search.py
  reads it: completed requests over the round's duration, the median over the repeats at each C,
  the highest C's median or any higher one). No open loop carries more than the server serves
  with every slot busy; at that rate itself the queue has no steady state (ρ = 1). A layout that
  its highest C did not saturate gets a rate that is low: the rule errs towards outside;
* **the delivered rate**: the requests it completed over the span of their completions
  (``(n − 1) / (last done − first done)``) against the rate its arrivals were offered at
  (``(n − 1) / (last due − first due)``, the probe's own schedule, so that the draw of its gaps
  is no part of the test). In a stable queue the two spans differ only by the last request's
  wait against the first one's; in an overloaded one completions come at the server's rate, so
  the delivered rate falls short by the overload factor. A rate over ``n − 1`` gaps is known to
  about ``1/√(n − 1)`` of itself, so the probe is overloaded when its delivered rate is below
  the offered one by more than ``Z / √(n − 1)`` of it (Z = 1.645: one-sided 95 %);
* **the waits' trend**: each request's wait from when it was due to its first token (the
  client's wait for a concurrency slot included), in arrival order, after the warm-up (the
  SLO's ``trim`` of the requests at the start: every probe starts from an empty queue, whose
  waits rise towards the steady state). An overloaded queue's waits grow with time at the rate
  ``offered / delivered − 1`` (seconds of wait per second), a stable one's do not. The waits are
  cut into batches of ``⌈√m⌉`` requests (a queue's waits are correlated, their batch means much
  less so) and the batch means' least-squares slope against their mean due time is tested
  one-sided at 95 % (Student's t on the batches − 2 degrees of freedom). A slope that is
  significant but small is a queue still relaxing from its empty start, not an overload: the
  probe is overloaded only when the slope's lower bound is also above :data:`MIN_GROWTH` (the
  waits grow by at least 10 % of the time elapsed: a server delivering under ~91 % of the
  offered rate). Three batches at least (nine requests after the warm-up), else no trend test.

:func:`min_requests` is the probe size at which the delivered-rate test sees an overload of a
stated margin (measure/probesize.py floors every sized probe at it).

A concurrency search is a closed loop (the client waits for a slot before sending), so it
cannot overload the server: none of these applies to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ppsweep.stats.studentt import t_ppf

__all__ = ["MARGIN", "MIN_GROWTH", "Overload", "Z", "min_requests", "overload"]

Z = 1.645  # one-sided 95 %
MIN_GROWTH = 0.10  # the waits' growth (s per s) below which a trend is a queue still relaxing
MARGIN = 0.25  # the overload (offered / served − 1) the probe floor lets the rate test see


def min_requests(margin: float = MARGIN, z: float = Z) -> int:
    """The fewest requests whose delivered-rate test sees an overload of ``margin`` (offered =
    (1 + margin) × served): it sees one when the delivered share ``1 / (1 + margin)`` is below
    ``1 − z/√(n − 1)``, i.e. ``n ≥ 1 + (z (1 + margin) / margin)²`` (69 at a margin of 25 %:
    over such a probe the arrivals outnumber what the server completes in the same span by
    ``n·margin / (1 + margin)`` requests, ``z`` times the spread of their count)."""
    if not margin > 0:
        raise ValueError(f"margin must be > 0, found {margin!r}")
    return 1 + math.ceil((z * (1.0 + margin) / margin) ** 2)


@dataclass(frozen=True)
class Overload:
    """One probe's overload tests (rates per scaled second; None: the test could not run)."""

    load: float  # the asked rate
    saturation_rps: float | None
    offered_rps: float | None  # the probe's own arrivals: (n − 1) over the span of their dues
    delivered_rps: float | None  # its completions: (n − 1) over the span of their times
    tolerance: float | None  # the delivered rate's allowed shortfall, a share of the offered
    growth: float | None  # the waits' slope, seconds per second
    growth_low: float | None  # its one-sided 95 % lower bound

    @property
    def above_saturation(self) -> bool:
        return self.saturation_rps is not None and self.load >= self.saturation_rps

    @property
    def short(self) -> bool:
        return (self.offered_rps is not None and self.delivered_rps is not None
                and self.tolerance is not None
                and self.delivered_rps < self.offered_rps * (1.0 - self.tolerance))

    @property
    def growing(self) -> bool:
        return self.growth_low is not None and self.growth_low > MIN_GROWTH

    @property
    def overloaded(self) -> bool:
        return self.above_saturation or self.short or self.growing

    def reasons(self) -> tuple[str, ...]:
        """Each test that found the probe overloaded, in words (slo_probes.csv's reasons)."""
        out = []
        if self.above_saturation:
            assert self.saturation_rps is not None
            out.append(f"overloaded: {self.load:.3g} req/s is at or above the layout's "
                       f"saturation rate {self.saturation_rps:.3g} req/s (its closed-loop "
                       "throughput in this run): no steady state there")
        if self.short:
            assert self.offered_rps is not None and self.delivered_rps is not None
            assert self.tolerance is not None
            got = self.delivered_rps / self.offered_rps
            out.append(f"overloaded: delivered {self.delivered_rps:.3g} req/s of the "
                       f"{self.offered_rps:.3g} req/s offered ({got:.0%}; the noise allows "
                       f"{1 - self.tolerance:.0%})")
        if self.growing:
            assert self.growth is not None and self.growth_low is not None
            out.append(f"overloaded: the waits grew through the probe by {self.growth:.2g} s "
                       f"per s (at least {self.growth_low:.2g} at 95 %, over "
                       f"{MIN_GROWTH:g}): its queue was still filling")
        return tuple(out)


def _due(rec: Mapping[str, Any]) -> float | None:
    for key in ("scheduled_at_s", "sent_at_s"):
        if rec.get(key) is not None:
            return float(rec[key])
    return None


def _wait(rec: Mapping[str, Any]) -> float | None:
    """Due → first token (scaled seconds), the wait for a slot of the cap included."""
    due, sent, ttft = _due(rec), rec.get("sent_at_s"), rec.get("ttft_s")
    if due is None or sent is None or ttft is None:
        return None
    return float(sent) - due + float(ttft)


def _rates(records: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    dues = sorted(d for r in records if (d := _due(r)) is not None)
    dones = sorted(float(r["done_at_s"]) for r in records
                   if r.get("ok") and r.get("done_at_s") is not None)
    if len(dues) < 2 or len(dones) < 2 or not dues[-1] > dues[0]:
        return None, None
    offered = (len(dues) - 1) / (dues[-1] - dues[0])
    span = dones[-1] - dones[0]
    delivered = (len(dones) - 1) / span if span > 0 else math.inf
    return offered, delivered


def _trend(records: Sequence[Mapping[str, Any]], trim: float) -> tuple[float | None,
                                                                        float | None]:
    pairs = sorted((d, w) for r in records if r.get("ok")
                   and (d := _due(r)) is not None and (w := _wait(r)) is not None)
    pairs = pairs[math.floor(len(pairs) * trim):]
    size = math.ceil(math.sqrt(len(pairs))) if pairs else 0
    batches = len(pairs) // size if size else 0
    if batches < 3:
        return None, None
    xs, ys = [], []
    for b in range(batches):
        chunk = pairs[b * size:(b + 1) * size]
        xs.append(sum(d for d, _ in chunk) / len(chunk))
        ys.append(sum(w for _, w in chunk) / len(chunk))
    mx, my = sum(xs) / batches, sum(ys) / batches
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx > 0:
        return None, None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    dof = batches - 2
    se = math.sqrt(resid / dof / sxx) if dof > 0 else math.inf
    return slope, slope - t_ppf(0.95, dof) * se if dof > 0 else None


def overload(records: Sequence[Mapping[str, Any]], load: float, saturation_rps: float | None,
             trim: float) -> Overload:
    """The overload tests of one rate probe at ``load`` req/s (module docstring); its records
    with their schedule (``scheduled_at_s``), completions (``done_at_s``) and TTFTs."""
    offered, delivered = _rates(records)
    done = sum(bool(r.get("ok")) for r in records)
    tolerance = Z / math.sqrt(done - 1) if done > 1 else None
    growth, low = _trend(records, trim)
    return Overload(load=load, saturation_rps=saturation_rps, offered_rps=offered,
                    delivered_rps=delivered, tolerance=tolerance, growth=growth,
                    growth_low=low)
