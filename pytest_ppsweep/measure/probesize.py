"""How many requests an SLO probe sends when ``[workload.slo] requests = "auto"``: the fewest
that keep the capacity estimate within its stated precision (``precision_pct``), computed from
the layout's own measured prefill time and the search's first probe (run/slo_search.py sizes the
probes after it). Pure: no server, no file.

Why a probe must be long. Every probe starts from an empty queue, so its first requests wait
less than they would in the steady state, and a short probe sees a capacity that is too high
however many probes run (benchmarks/bench_slo_capacity.py: 40 requests a probe are within ±10 %
of the truth in 40 % of its seeds). How long the start matters depends on how close to
saturation the SLO sits, which is what this module computes.

The model (an assumption, stated where it is used: the size's progress line):

* the layout's prefill is one FIFO queue with Poisson arrivals (a rate search sends them,
  measure/arrivals.py) and a deterministic service time ``S`` per request: an M/D/1 queue,
  behind a fixed latency. ``S`` is the layout's measured prefill time per request at
  saturation (its rounds' input tokens per request over their Input TPS at the highest C, on
  this boot); the fixed latency is its TTFT with no queue, ``T0``, read from the search's first
  probe (at ``min``, where the queue is nearly always empty: its TTFT p50 is ``T0`` while
  ρ < ½). A pipeline holds several requests at once, so ``T0`` exceeds ``S`` there (the
  emulated PP8 of the seeds: S = 1.85 s, T0 = 7.4 s); TTFT = T0 + the queue's wait. Batching of
  short prompts and decode interference are outside it: only TTFT percentile limits of a rate
  search are modelled; any other SLO keeps the workload's ``num_requests``, and says so;
* the load the SLO allows: the utilisation ρ* at which the steady-state TTFT percentile equals
  its limit (the wait allowed is the limit − T0; none when T0 is over it), from Erlang's exact
  M/D/1 waiting-time distribution (Erlang 1909; as given by
  Gross and Harris, *Fundamentals of Queueing Theory*, M/D/1):
  P(W ≤ x) = (1 − ρ) Σ_{k=0}^{⌊x/S⌋} [λ(kS − x)]^k / k! · e^{−λ(kS − x)}, λ = ρ/S
  (computed in 80+ decimal digits: its terms alternate and cancel);
* how long the empty start lasts: the queue's relaxation time, ρ/(1 − √ρ)² requests (Morse,
  "Stochastic properties of waiting lines", 1955; Cohen, *The Single Server Queue*), 52
  requests at ρ = 0.77 and 117 at ρ = 0.84;
* the bias it leaves: the waits approach the steady state as 1 − e^{−t/τ}, so over the requests
  a probe keeps (``trim`` left out at each end) the mean wait falls short by the share
  τ/(b − a)·(e^{−a/τ} − e^{−b/τ}) (a, b: the kept window); a wait short by a share δ moves the
  load found by (1 − ρ*)·δ (the M/D/1 mean wait ρS/(2(1 − ρ)) differentiated);
* the size: the fewest requests whose bias is at most ``BIAS_SHARE`` of ``precision_pct``, and
  never fewer than the binomial bound needs to prove each percentile on the kept requests
  (measure/withinslo.min_requests).

``BIAS_SHARE`` = ¾ leaves a quarter of the precision to the probes' noise, which the refine
probes narrow (results/slocapacity.py). It is calibrated on bench_slo_capacity's queue model of
the seeds' 16K prefill server (S = 1.86 s, TTFT p50 ≤ 5 s, ρ* = 0.84, 200 seeds), where probes of
this size (198) are within ±10 % of the true capacity in every seed and the 95 % interval holds
the truth in 95.0 % of them; a share of 1 (120 requests) lets the coverage fall to 90.5 %, under
its 92.5 % floor, and ½ (321) costs 50 % more arrivals for no gain the benchmark can see. The
first probe, at the minimum load, sends the workload's own size: it is the probe that measures
the TTFT with no queue, and the slowest to send (2.11 h of arrivals per search with "auto"
against 2.99 h with 198 throughout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext

from pytest_ppsweep.matrix.slospec import SloSpec
from pytest_ppsweep.measure.withinslo import min_requests

__all__ = ["BIAS_SHARE", "ProbeSize", "capacity_utilisation", "md1_wait_cdf", "not_modelled",
           "probe_size", "relaxation_requests", "start_bias"]  # fmt: skip

BIAS_SHARE = 0.75
_MAX_TERMS = 2000  # x / S beyond this: the limit is far from the queue (ρ* ≈ 1), not modelled
_MAX_REQUESTS = 100_000


def md1_wait_cdf(wait_s: float, rho: float, service_s: float) -> float:
    """P(W ≤ ``wait_s``) of an M/D/1 queue at utilisation ``rho`` with service time
    ``service_s`` (Erlang's formula; module docstring)."""
    if wait_s < 0:
        return 0.0
    if not 0 <= rho < 1:
        raise ValueError(f"utilisation must be in [0, 1), found {rho!r}")
    terms = int(wait_s / service_s)
    if terms > _MAX_TERMS:
        raise ValueError(f"wait {wait_s:g} s is over {_MAX_TERMS} service times: not modelled")
    lam_x = rho * wait_s / service_s
    with localcontext() as ctx:
        ctx.prec = 40 + int(lam_x * 0.9)  # e^{λx}-sized terms cancel to a share in [0, 1]
        lam, x, s = Decimal(rho) / Decimal(service_s), Decimal(wait_s), Decimal(service_s)
        total = Decimal(0)
        for k in range(terms + 1):
            a = lam * (k * s - x)
            total += (a**k if k else Decimal(1)) / math.factorial(k) * (-a).exp()
        return min(max(float((1 - Decimal(rho)) * total), 0.0), 1.0)


def capacity_utilisation(service_s: float, limit_s: float, percentile: int,
                         latency_s: float | None = None) -> float | None:
    """ρ* at which the steady-state TTFT ``percentile`` equals ``limit_s`` (TTFT = the wait +
    ``latency_s``, the TTFT with no queue; default ``service_s``); None when no load meets it
    (the limit is under that latency)."""
    wait = limit_s - (service_s if latency_s is None else latency_s)
    share = percentile / 100.0
    if wait < 0 or md1_wait_cdf(wait, 0.0, service_s) < share:
        return None
    lo, hi = 0.0, 1.0 - 1e-9
    for _ in range(60):
        mid = (lo + hi) / 2
        if md1_wait_cdf(wait, mid, service_s) >= share:
            lo = mid
        else:
            hi = mid
    return lo


def relaxation_requests(rho: float) -> float:
    """The queue's relaxation time at utilisation ``rho``, in requests: ρ / (1 − √ρ)²."""
    return rho / (1.0 - math.sqrt(rho)) ** 2


def start_bias(n: int, rho: float, trim: float) -> float:
    """The share by which probes of ``n`` requests from an empty queue overestimate the load
    the SLO allows (module docstring), ``trim`` of them left out at each end."""
    tau = relaxation_requests(rho)
    a, b = trim * n, (1.0 - trim) * n
    if b <= a:
        return math.inf
    short = tau / (b - a) * (math.exp(-a / tau) - math.exp(-b / tau))
    return (1.0 - rho) * short


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


def probe_size(slo: SloSpec, service_s: float | None, fallback: int,
               latency_s: float | None = None) -> ProbeSize:
    """The requests a probe of ``slo`` sends when its ``requests`` is ``"auto"``, for the layout
    whose measured prefill time per request at saturation is ``service_s`` and whose TTFT with
    no queue is ``latency_s`` (None: ``service_s``, one request at a time); ``fallback``: the
    workload's ``num_requests``, used with the reason when the model does not apply."""
    floors = [math.ceil(min_requests(lim.percentile or 100, slo.confidence)
                        / max(1.0 - 2 * slo.trim, 1e-9))
              for lim in slo.percentile_limits]
    floor = max(floors, default=1)
    ttft = [lim for lim in slo.percentile_limits if lim.metric == "ttft"]
    why = not_modelled(slo)
    if why is None and (service_s is None or not service_s > 0):
        why = "no measured Input TPS of this layout in this run to model its prefill queue on"
    if why is not None:
        n = max(fallback, floor)
        return ProbeSize(n, f"the workload's num_requests: {why}"
                         + (f"; {floor} to prove its percentiles" if floor > fallback else ""))
    assert service_s is not None
    utilisations = []
    for lim in ttft:
        try:
            rho = capacity_utilisation(service_s, lim.limit_s, lim.percentile or 100, latency_s)
        except ValueError as exc:
            return ProbeSize(max(fallback, floor), f"the workload's num_requests: {exc}")
        if rho is not None:
            utilisations.append(rho)
    if not utilisations:
        lat = service_s if latency_s is None else latency_s
        return ProbeSize(max(fallback, floor),
                         f"the workload's num_requests: no load meets the TTFT limits, whose "
                         f"TTFT with no queue is already {lat:.3g} s")
    rho = max(utilisations)  # the longest relaxation bounds the others
    allowed = BIAS_SHARE * slo.precision_pct / 100.0
    n = floor
    while start_bias(n, rho, slo.trim) > allowed and n < _MAX_REQUESTS:
        n += 1
    tau = relaxation_requests(rho)
    behind = ("" if latency_s is None
              else f" behind a TTFT of {latency_s:.3g} s with no queue (the first probe's)")
    return ProbeSize(n, (
        f"M/D/1 model of the prefill queue at the measured {service_s:.3g} s per request"
        f"{behind}: the "
        f"SLO sits near utilisation {rho:.2f}, where the queue relaxes in ~{tau:.0f} requests; "
        f"{n} keep the empty start's bias within {allowed * 100:.3g} % of the capacity "
        f"(¾ of precision_pct {slo.precision_pct:g} %)"
        + (f"; {floor} prove its percentiles" if n == floor else "")),
        modelled=True, rho=rho, relaxation=tau)
