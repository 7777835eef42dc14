"""The M/D/1 queue model that sizes an SLO probe (measure/probesize.py, for ``[workload.slo]
requests = "auto"``): how long a probe that starts from an empty queue must be for its start to
bias the capacity found by less than a stated share. Pure: numbers in, numbers out.

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
  search are modelled (measure/probesize.not_modelled says which SLOs are not);
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
* the size (:func:`requests_for`): the fewest requests whose bias is at most ``BIAS_SHARE`` of
  ``precision_pct``, and never fewer than a floor (measure/probesize.py: what the binomial bound
  needs to prove each percentile on the kept requests, stats/binomial.min_requests).

``BIAS_SHARE`` = ¾ leaves a quarter of the precision to the probes' noise, which the refine
probes narrow (results/slocapacity.py). It is calibrated on bench_slo_capacity's queue model of
the seeds' 16K prefill server (S = 1.86 s, TTFT p50 ≤ 5 s, ρ* = 0.84, 200 seeds), where probes of
this size (198) are within ±10 % of the true capacity in every seed and the 95 % interval holds
the truth in 95.0 % of them; a share of 1 (120 requests) lets the coverage fall to 90.5 %, under
its 92.5 % floor, and ½ (321) costs 50 % more arrivals for no gain the benchmark can see. Those
are the seeds it was tuned on: on 200 others, with the service time estimated from a closed-loop
round, the interval holds the truth in 90.5 % (p50), 59 % (p90), 58 % (p99), 89 % (service times
spread) and 85 % (a batching server) of them (bench_slo_capacity's fresh cells). The
first probe, at the minimum load, sends the workload's own size: it is the probe that measures
the TTFT with no queue, and the slowest to send (2.11 h of arrivals per search with "auto"
against 2.99 h with 198 throughout).
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext

__all__ = ["BIAS_SHARE", "capacity_utilisation", "md1_wait_cdf", "relaxation_requests",
           "requests_for", "start_bias"]

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


def requests_for(rho: float, allowed: float, trim: float, floor: int) -> int:
    """The fewest requests, at least ``floor``, whose empty start leaves a bias
    (:func:`start_bias`) of at most ``allowed`` (a share of the capacity) at utilisation
    ``rho`` (at most a hundred thousand)."""
    n = floor
    while start_bias(n, rho, trim) > allowed and n < _MAX_REQUESTS:
        n += 1
    return n
