"""Open-loop arrivals: when each request of a round is due, and whether the client kept up.

The schedule follows bench_serving 0.5.23's ``get_request`` (``sglang/benchmark/serving.py``):
the first request at t = 0, then after each one a gap drawn from an exponential distribution of
mean ``1 / request_rate`` (Poisson arrivals); ``request_rate = inf`` sends every request at
once. ``max_concurrency`` is not part of the schedule there either: a request that is due waits
for a slot of the cap (a semaphore inside the request), so the cap delays sends, never the
arrivals behind it. bench_serving 0.5.23 has no burstiness factor; ``burstiness`` here is
vLLM's ``benchmark_serving`` one (gamma-distributed gaps of shape ``burstiness`` and mean
``1 / request_rate``: 1 is Poisson, below 1 burstier, above 1 more regular).

Differences from bench_serving, and why:

* The gaps come from a generator seeded by the workload's seed (``(seed, 2)``) and the round's
  arrival stream: stream 0 (every closed-loop round) is ``(seed, 2)``; the SLO search gives each
  probe and each repeat its own stream ``(seed, 2, k)``, so one probe's 40 arrivals are not
  replayed by every other probe, while every layout draws the same stream at
  the same probe: common random numbers between layouts. bench_serving draws from numpy's
  global state.
* Sends are scheduled at absolute offsets from the round's start. bench_serving sleeps each gap
  after the previous yield, so a client that falls behind sends later and later and silently
  measures a lower rate than asked. Here every request records when it was due
  (``scheduled_at_s``) and when the client got to it (``issued_at_s``, before any wait for the
  cap): :func:`lag` says whether the client fell behind.

A client is *behind* when it no longer offers the asked arrival process: its sends span more
than the schedule's (the rate it issued is below ``1 − RATE_SLACK`` of the rate its schedule
asked: lateness that accumulates, as bench_serving's would), or the spread of its lateness, the
99th percentile of ``issued − scheduled`` above its median (real seconds), exceeds
``max(LAG_FLOOR_S, LAG_GAPS × mean gap)``: requests bunched by more than half a gap. A constant
delay shifts every arrival alike and changes neither the rate nor the gaps, so it does not
count. ``LAG_FLOOR_S`` covers the event loop's timer resolution.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["LAG_FLOOR_S", "LAG_GAPS", "RATE_SLACK", "Lag", "lag", "schedule"]

LAG_FLOOR_S = 0.005
LAG_GAPS = 0.5
RATE_SLACK = 0.05


def schedule(num_requests: int, request_rate: float, *, seed: int, burstiness: float = 1.0,
             time_scale: float = 1.0, stream: int = 0) -> list[float]:
    """Each request's due offset from the round's start, in real seconds (the rate is per
    scaled second, so real gaps are the drawn ones divided by ``time_scale``)."""
    if num_requests < 1:
        return []
    if math.isinf(request_rate):
        return [0.0] * num_requests
    if not request_rate > 0 or not burstiness > 0 or not time_scale > 0:
        raise ValueError(f"need request_rate, burstiness and time_scale > 0: {request_rate}, "
                         f"{burstiness}, {time_scale}")
    rng = np.random.default_rng([seed, 2] if stream == 0 else [seed, 2, stream])
    if burstiness == 1.0:  # the exponential draw bench_serving makes (same stream as before)
        gaps = rng.exponential(1 / request_rate, num_requests)
    else:
        gaps = rng.gamma(burstiness, 1 / (request_rate * burstiness), num_requests)
    return [0.0, *(np.cumsum(gaps[:-1]) / time_scale).tolist()]


@dataclass(frozen=True)
class Lag:
    """How far the client was behind its schedule in one round (real seconds)."""

    p50_s: float
    p99_s: float
    max_s: float
    tolerance_s: float
    scheduled_rate: float  # what the schedule asked, per scaled second (n − 1 over its span)
    issued_rate: float  # what the client issued, per scaled second

    @property
    def behind(self) -> bool:
        return (self.p99_s - self.p50_s > self.tolerance_s
                or self.issued_rate < (1 - RATE_SLACK) * self.scheduled_rate)

    def text(self) -> str:
        return (f"client behind its schedule: issued {self.issued_rate:.3g} req/s of "
                f"{self.scheduled_rate:.3g} asked (lag p50 {self.p50_s * 1e3:.1f} ms, p99 "
                f"{self.p99_s * 1e3:.1f} ms real, max {self.max_s * 1e3:.1f} ms; tolerance "
                f"{self.tolerance_s * 1e3:.1f} ms over the p50)")


def lag(records: Iterable[Mapping[str, Any]], time_scale: float = 1.0) -> Lag | None:
    """The lag of a round's records (``scheduled_at_raw_s``/``issued_at_raw_s``); None when
    they carry no schedule (an older round) or everything was due at once."""
    pairs = sorted((float(r["scheduled_at_raw_s"]), float(r["issued_at_raw_s"]))
                   for r in records
                   if r.get("scheduled_at_raw_s") is not None
                   and r.get("issued_at_raw_s") is not None)
    if len(pairs) < 2 or pairs[-1][0] <= 0:
        return None
    late = np.maximum(np.array([i - s for s, i in pairs]), 0.0)
    span = pairs[-1][0] - pairs[0][0]
    mean_gap = span / (len(pairs) - 1)
    issued = [i for _, i in pairs]
    issued_span = max(issued) - min(issued)
    per_scaled = (len(pairs) - 1) / time_scale
    return Lag(
        p50_s=float(np.percentile(late, 50)),
        p99_s=float(np.percentile(late, 99)),
        max_s=float(late.max()),
        tolerance_s=max(LAG_FLOOR_S, LAG_GAPS * mean_gap),
        scheduled_rate=per_scaled / span,
        issued_rate=per_scaled / issued_span if issued_span > 0 else math.inf,
    )
