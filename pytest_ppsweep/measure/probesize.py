"""How many requests an SLO probe sends when ``[workload.slo] requests = "auto"``: the fewest
that keep the capacity estimate within its stated precision (``precision_pct``), computed from
the layout's own measured prefill time and the search's first probe (run/slo_search.py sizes the
probes after it). Pure: no server, no file.

The queue model, its assumptions and the calibration of its bias share are stats/md1queue.py;
this module applies it to a workload's SLO: only TTFT percentile limits of a rate search are
modelled, any other SLO keeps the workload's ``num_requests`` and says so, and no size is below
two floors:

* what the binomial bound needs to prove each percentile on the kept requests
  (stats/binomial.min_requests);
* for a rate search, the size at which an overload shows (measure/overload.min_requests: 69
  requests). The M/D/1 bias above shrinks with ``1 − ρ*``, so near saturation (a lenient limit
  behind a long TTFT with no queue) it asks for a handful of requests, and a handful of requests
  above capacity never builds the queue they would build: their TTFTs meet the limit while the
  load cannot be carried. A probe of ``n`` requests at a load ``1 + m`` times what the server
  serves receives ``n·m/(1 + m)`` more requests than it completes over the same span; the count
  of arrivals in that span spreads by about ``√n``, so the excess is visible at one-sided 95 %
  (z = 1.645) when ``n ≥ 1 + (z (1 + m)/m)²``: 69 at m = 25 %. The first probe of ``"auto"``,
  at the search's minimum load, keeps the workload's size (it measures the TTFT with no queue,
  and the minimum sits far below saturation; the saturation rule, measure/overload.py, marks it
  overloaded otherwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_ppsweep.matrix.slospec import SloSpec
from pytest_ppsweep.measure.overload import min_requests as overload_floor
from pytest_ppsweep.stats.binomial import min_requests
from pytest_ppsweep.stats.md1queue import (
    BIAS_SHARE,
    capacity_utilisation,
    relaxation_requests,
    requests_for,
)

__all__ = ["ProbeSize", "not_modelled", "probe_size", "queue_floor"]


@dataclass(frozen=True)
class ProbeSize:
    """A probe's requests and why: ``modelled`` when the queue model sized it (its utilisation
    and relaxation time given), else the workload's own size with the reason."""

    requests: int
    why: str
    modelled: bool = False
    rho: float | None = None
    relaxation: float | None = None

    def line(self) -> str:
        return f"SLO probe size: {self.requests} requests a probe ({self.why})"


def not_modelled(slo: SloSpec) -> str | None:
    """Why the queue model cannot size ``slo``'s probes (None: it can, once the layout's prefill
    time is measured)."""
    if slo.search != "rate":
        return ("a concurrency search is a closed loop, not the Poisson queue the size is "
                "modelled on")
    if not any(lim.metric == "ttft" for lim in slo.percentile_limits):
        return "only TTFT percentile limits are modelled (the prefill queue)"
    return None


def queue_floor(slo: SloSpec) -> int:
    """The fewest requests a probe of ``slo`` needs for an overload to show (module docstring;
    1 for a concurrency search: a closed loop cannot overload the server)."""
    return overload_floor() if slo.search == "rate" else 1


def probe_size(slo: SloSpec, service_s: float | None, fallback: int,
               latency_s: float | None = None, first: bool = False) -> ProbeSize:
    """The requests a probe of ``slo`` sends when its ``requests`` is ``"auto"``, for the layout
    whose measured prefill time per request at saturation is ``service_s`` and whose TTFT with
    no queue is ``latency_s`` (None: ``service_s``, one request at a time); ``fallback``: the
    workload's ``num_requests``, used with the reason when the model does not apply.
    ``first``: the search's first probe, at its minimum load, which keeps the binomial floor
    only (module docstring)."""
    floors = [math.ceil(min_requests(lim.percentile or 100, slo.confidence)
                        / max(1.0 - 2 * slo.trim, 1e-9))
              for lim in slo.percentile_limits]
    floor = max(floors, default=1)
    queue = 1 if first else queue_floor(slo)
    if queue > floor:
        floor = queue
    ttft = [lim for lim in slo.percentile_limits if lim.metric == "ttft"]
    why = not_modelled(slo)
    if why is None and (service_s is None or not service_s > 0):
        why = "no measured Input TPS of this layout in this run to model its prefill queue on"
    def kept(why: str) -> ProbeSize:
        return ProbeSize(max(fallback, floor), f"the workload's num_requests: {why}"
                         + (f"; {floor} to prove its percentiles and let an overload show"
                            if floor > fallback else ""))

    if why is not None:
        return kept(why)
    assert service_s is not None
    utilisations = []
    for lim in ttft:
        try:
            rho = capacity_utilisation(service_s, lim.limit_s, lim.percentile or 100, latency_s)
        except ValueError as exc:
            return kept(str(exc))
        if rho is not None:
            utilisations.append(rho)
    if not utilisations:
        lat = service_s if latency_s is None else latency_s
        return kept(f"no load meets the TTFT limits, whose TTFT with no queue is already "
                    f"{lat:.3g} s")
    rho = max(utilisations)  # the longest relaxation bounds the others
    allowed = BIAS_SHARE * slo.precision_pct / 100.0
    n = requests_for(rho, allowed, slo.trim, floor)
    tau = relaxation_requests(rho)
    behind = ("" if latency_s is None
              else f" behind a TTFT of {latency_s:.3g} s with no queue (the first probe's)")
    return ProbeSize(n, (
        f"M/D/1 model of the prefill queue at the measured {service_s:.3g} s per request"
        f"{behind}: the "
        f"SLO sits near utilisation {rho:.2f}, where the queue relaxes in ~{tau:.0f} requests; "
        f"{n} keep the empty start's bias within {allowed * 100:.3g} % of the capacity "
        f"(¾ of precision_pct {slo.precision_pct:g} %)"
        + (f"; {floor} prove its percentiles and let an overload show (measure/overload.py)"
           if n == floor else "")),
        modelled=True, rho=rho, relaxation=tau)
