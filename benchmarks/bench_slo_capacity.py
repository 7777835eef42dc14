"""Does the SLO search's capacity figure hold? (issue 37, points 7 and 9)

A queue model of the seeds' 16K prefill server, no servers, seconds: one FIFO server whose every
request takes the same prefill time ``S = input_len / TPS`` (16,384 tokens at 8,800 tok/s, the
seeds' PP8 throughput: S = 1.86 s; an M/D/1 queue: Poisson arrivals, deterministic service,
no batching, the modelled assumption), TTFT = the wait in the queue + S. Its true capacity under
"TTFT p50 ≤ 5 s" is the rate whose steady-state median TTFT is 5 s, found once by a long
simulation (200,000 requests) and bisection.

Each seed runs the plugin's own search as run/slo_search.new_search builds it with the seeds'
[workload.slo] (min 0.05, max 2.0 req/s, precision 0.05, 8 probes, 3 repeats, the high end
confirmed) and the defaults of the capacity estimate (results/slocapacity.py: precision_pct 10,
max_refine 16, confidence 0.95), with the plugin's own probe verdict and counts
(measure/withinslo: the warm-up and drain trimmed, the percentile judged with the binomial
bound at 95 % over the probe's effective requests, its own dispersion by batch means). Every
probe starts from an empty queue and draws its own arrival stream, as the plugin's probes do.
Figures, per probe size (requests a probe):

- **capacity error**: the share of seeds whose capacity estimate is within ±10 % of the truth
  (goal ≥ 90 % with slo.toml's ``requests = "auto"``: the first probe sends the workload's 40
  requests, the others the size measure/probesize.py computes from S and that probe's TTFT,
  198 for this server; the fixed sizes are shown beside it: 120 and 321 are the sizes of a
  bias share of 1 and ½ instead of ¾, stats/md1queue.BIAS_SHARE);
- **coverage**: the share of seeds whose stated 95 % interval holds the truth (goal: its
  nominal 95 %; a one-sided binomial test at 5 % over the seeds, so a calibrated interval
  passes 95 % of the time: measured ≥ 95 % − 1.645 standard errors of the seeds' count);
- **the bracket's low end at or below the truth** (a load shown within on every repeat; goal
  ≥ 95 %), and how often the interval is as narrow as asked;
- **cost**: the mean probes (the refine ones among them) and the arrival time they take
  (cluster hours).

The seeds' slo.toml sizes its probes (``[workload.slo] requests = "auto"``: 198 requests here,
where 200 were set by hand before): a probe starts from an empty queue, and shorter ones see
less queueing than the steady state, so they overestimate the capacity however many run (the
40 and 100 rows).

Before (the bracket alone, its low end as the answer, 100 seeds): 18/40/54/63 % of seeds within
±10 % at 40/200/400/1,000 requests a probe.

Then cells the method was never tuned on (``BIAS_SHARE`` and ``MIN_REFINE`` were set on the
seeds above): other seeds (from 1,000,001), TTFT p90 ≤ 8 s and p99 ≤ 12 s besides p50 ≤ 5 s, the
service time *estimated* as the plugin does (a 40-request closed-loop round's duration over its
requests) instead of handed the truth, and two servers that are not M/D/1: service times spread
(gamma, CV 0.5: M/G/1) and batching (up to 4 waiting prompts served together in
S·(1 + 0.5·(b − 1))). Their coverage is printed as measured, with no goal: it is what the
method gives off the case it was tuned on.

    python benchmarks/bench_slo_capacity.py [--seeds 200] [--smoke]

``--smoke``: 8 seeds and two probe sizes (its rates mean nothing; the code path is the same).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchkit.results import Result, add_smoke, finish, goal, info  # noqa: E402

from pytest_ppsweep.matrix.parse import load  # noqa: E402
from pytest_ppsweep.matrix.slospec import SloLimit, SloSpec  # noqa: E402
from pytest_ppsweep.measure.probesize import probe_size  # noqa: E402
from pytest_ppsweep.measure.withinslo import judge_percentile  # noqa: E402
from pytest_ppsweep.run.slo_search import new_search  # noqa: E402

INPUT_LEN, TPS = 16384, 8800.0  # the seeds' 16K prompts on PP8 (seeds §5)
SERVICE_S = INPUT_LEN / TPS
LIMIT = SloLimit("ttft", 50, 5.0)
SHIPPED = load(REPO / "test_matrix" / "slo.toml").workload  # the seeds' SLO sweep
assert SHIPPED.slo is not None and SHIPPED.slo.limits == (LIMIT,)
SLO: SloSpec = SHIPPED.slo  # its range, precision, budget and the estimate's defaults
REPEATS, TRIM = SHIPPED.repeats, SLO.trim
ERROR_GOAL, LOW_GOAL = 0.90, 0.95
# slo.toml's requests = "auto": the first probe sends the workload's num_requests, the others
# the size measure/probesize.py computes from S and the first probe's TTFT p50 (here S: one
# prompt at a time), as run/slo_search.py does; the goals must hold there
assert SLO.auto_requests
AUTO = probe_size(SLO, SERVICE_S, SHIPPED.num_requests, SERVICE_S)  # what the line says
assert AUTO.modelled, AUTO
DEFAULT_REQUESTS = 0  # "auto" in the sizes below


def ttfts(rate: float, n: int, rng: random.Random) -> list[float]:
    """TTFT of ``n`` Poisson arrivals at ``rate`` into an empty FIFO queue of prefill time S."""
    t = free = 0.0
    out = []
    for _ in range(n):
        start = max(t, free)
        free = start + SERVICE_S
        out.append(free - t)
        t += rng.expovariate(rate)
    return out


def true_capacity() -> float:
    """The rate whose steady-state median TTFT is the limit (200,000 requests, bisection)."""
    lo, hi = 0.05, 1.0 / SERVICE_S
    for _ in range(30):
        mid = (lo + hi) / 2
        values = ttfts(mid, 200_000, random.Random(12345))[20_000:]
        if statistics.median(values) <= LIMIT.limit_s:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def probe(rate: float, n: int, rng: random.Random) -> tuple[bool, tuple[int, int], float]:
    """The plugin's verdict on one probe (the warm-up and drain trimmed, the binomial bound)
    and its count over the limit, as measure/withinslo.evaluate gives them."""
    values = ttfts(rate, n, rng)
    cut = math.floor(n * TRIM)
    kept = values[cut:n - cut] if cut and n > 2 * cut else values
    within = judge_percentile(kept, LIMIT, SLO.confidence)[0] == "within"
    return within, (sum(v > LIMIT.limit_s for v in kept), len(kept)), statistics.median(values)


@dataclass(frozen=True)
class Run:
    """One seed's search: its bracket's low end, its capacity estimate, its cost."""

    low: float | None
    point: float | None
    lo: float | None
    hi: float | None
    probes: int
    refines: int
    arrival_s: float


def one_search(seed: int, n: int) -> Run:
    """The plugin's search policy with probes of ``n`` requests (0: ``requests = "auto"``)."""
    workload = replace(SHIPPED, num_requests=n or SHIPPED.num_requests,
                       slo=replace(SLO, requests=0, auto_requests=False))
    search = new_search(workload)
    size = n or SHIPPED.num_requests
    spent = 0.0
    while (step := search.next()) is not None:
        k = len(search.rounds) + 1
        spent += size / step[0]
        within, over, ttft_p50 = probe(step[0], size, random.Random(seed * 1000 + k))
        search.record(step[0], within, {LIMIT.key: over})
        if not n and k == 1:  # "auto": sized from what the first probe measured
            size = probe_size(SLO, SERVICE_S, SHIPPED.num_requests, ttft_p50).requests
    cap = search.capacity()
    return Run(search.bracket.outcome().low, cap and cap.point, cap and cap.low, cap and cap.high,
               len(search.rounds), search.refines, spent)


# Cells the method was never tuned on (BIAS_SHARE and MIN_REFINE were set on seeds 1-200 of the
# cells above): other seeds, p90 and p99 limits, the service time estimated from a closed-loop
# round as the plugin does (not handed the truth), and servers that are not M/D/1.
FRESH_SEED0 = 1_000_000
SERVERS = ("M/D/1", "spread", "batching")


def served(rate: float, n: int, rng: random.Random, server: str) -> list[float]:
    """TTFTs of ``n`` Poisson arrivals at ``rate`` into an empty queue of ``server``: "M/D/1"
    (S each, one at a time), "spread" (gamma service times of mean S, CV 0.5: M/G/1) or
    "batching" (up to 4 waiting prompts served together in S·(1 + 0.5·(b − 1)): more requests
    per second under load, as a batching server)."""
    arrivals, t = [], 0.0
    for _ in range(n):
        arrivals.append(t)
        t += rng.expovariate(rate)
    out = [0.0] * n
    free, i = 0.0, 0
    while i < n:
        start = max(arrivals[i], free)
        if server == "batching":
            b = 1
            while i + b < n and b < 4 and arrivals[i + b] <= start:
                b += 1
            took = SERVICE_S * (1 + 0.5 * (b - 1))
        else:
            b = 1
            took = (rng.gammavariate(4.0, SERVICE_S / 4.0) if server == "spread"
                    else SERVICE_S)
        free = start + took
        for j in range(i, i + b):
            out[j] = free - arrivals[j]
        i += b
    return out


def capacity_of(limit: SloLimit, server: str, n: int = 100_000) -> float:
    """The rate whose steady-state TTFT percentile is the limit (``n`` requests, bisection)."""
    lo, hi = 0.01, 4.0 / SERVICE_S
    q = (limit.percentile or 100) / 100.0
    for _ in range(26):
        mid = (lo + hi) / 2
        values = sorted(served(mid, n, random.Random(12345), server)[n // 10:])
        if values[min(len(values) - 1, int(q * len(values)))] <= limit.limit_s:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def estimated_service(server: str, rng: random.Random) -> float:
    """The prefill time per request the plugin would read off a closed-loop round (40 requests
    at C=16: the queue always full): the round's duration over its requests."""
    return served(1e6, 40, rng, server)[-1] / 40


def fresh_search(seed: int, limit: SloLimit, server: str) -> Run:
    """One search on a fresh seed: requests = "auto" sized from an estimated service time."""
    slo = replace(SLO, limits=(limit,), requests=0, auto_requests=False)
    workload = replace(SHIPPED, slo=slo)
    search = new_search(workload)
    size = probe_size(slo, None, SHIPPED.num_requests, first=True).requests
    service = estimated_service(server, random.Random(FRESH_SEED0 + seed))
    spent = 0.0
    while (step := search.next()) is not None:
        k = len(search.rounds) + 1
        spent += size / step[0]
        rng = random.Random((FRESH_SEED0 + seed) * 1000 + k)
        values = served(step[0], size, rng, server)
        cut = math.floor(size * TRIM)
        kept = values[cut:size - cut] if cut and size > 2 * cut else values
        within = judge_percentile(kept, limit, SLO.confidence)[0] == "within"
        search.record(step[0], within, {limit.key: (sum(v > limit.limit_s for v in kept),
                                                    len(kept))})
        if k == 1:
            size = probe_size(slo, service, SHIPPED.num_requests,
                              statistics.median(values)).requests
    cap = search.capacity()
    return Run(search.bracket.outcome().low, cap and cap.point, cap and cap.low, cap and cap.high,
               len(search.rounds), search.refines, spent)


FRESH_CELLS = ((SloLimit("ttft", 50, 5.0), "M/D/1"), (SloLimit("ttft", 90, 8.0), "M/D/1"),
               (SloLimit("ttft", 99, 12.0), "M/D/1"), (SloLimit("ttft", 50, 5.0), "spread"),
               (SloLimit("ttft", 50, 5.0), "batching"))


def fresh_cells(seeds: int, smoke: bool = False) -> list[Result]:
    """Coverage of the stated interval on seeds it was never tuned on (stated, not a goal)."""
    out = []
    for limit, server in FRESH_CELLS:
        truth = capacity_of(limit, server, 5_000 if smoke else 100_000)
        runs = [fresh_search(s, limit, server) for s in range(1, seeds + 1)]
        held = sum(r.lo is not None and r.hi is not None and r.lo <= truth <= r.hi
                   for r in runs) / seeds
        near = sum(r.point is not None and abs(r.point / truth - 1) <= 0.10
                   for r in runs) / seeds
        below = sum(r.low is None or r.low <= truth for r in runs) / seeds
        none = sum(r.point is None for r in runs)
        out.append(info(f"fresh seeds, {limit} on a {server} server (truth {truth:.3f} req/s)",
                        f"95 % interval holds the truth in {held:.1%} of {seeds} seeds; "
                        f"estimate within 10 % in {near:.1%} ({none} without one); low end at "
                        f"or below the truth in {below:.1%}"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, default=200)
    add_smoke(ap, "8 seeds, probes of 40 and 200 requests")
    args = ap.parse_args()
    seeds = 8 if args.smoke else args.seeds
    sizes = (40, DEFAULT_REQUESTS) if args.smoke else (40, 100, 120, DEFAULT_REQUESTS, 321, 400)
    truth = true_capacity()
    nominal = SLO.confidence
    floor = nominal - 1.645 * math.sqrt(nominal * (1 - nominal) / seeds)
    results: list[Result] = [info("true capacity, TTFT p50 ≤ 5 s, M/D/1 at S = 1.86 s",
                                  f"{truth:.3f} req/s"),
                             info("probe size of requests = \"auto\" (measure/probesize.py)",
                                  f"{AUTO.requests} requests: {AUTO.why}")]
    for size in sizes:
        runs = [one_search(s, size) for s in range(1, seeds + 1)]
        n = f"{size}" if size else f'"auto" ({SHIPPED.num_requests} then {AUTO.requests})'

        near = sum(r.point is not None and abs(r.point / truth - 1) <= 0.10
                   for r in runs) / seeds
        held = sum(r.lo is not None and r.hi is not None and r.lo <= truth <= r.hi
                   for r in runs) / seeds
        narrow = sum(r.point is not None and r.lo is not None and r.hi is not None
                     and max(r.point - r.lo, r.hi - r.point) / r.point <= SLO.precision_pct / 100
                     for r in runs) / seeds
        below = sum(r.low is None or r.low <= truth for r in runs) / seeds
        found = sorted(r.point for r in runs if r.point is not None)
        span = f"{found[0]:.2f}-{found[-1]:.2f}" if found else "none"
        error = (f"{near:.1%} of {seeds} seeds (estimates {span} req/s, {seeds - len(found)} "
                 "without one)")
        if size == DEFAULT_REQUESTS:  # the goals hold at the size slo.toml's "auto" computes
            results += [
                goal(f"capacity within 10 % of the truth, {n} requests a probe", error,
                     f">= {ERROR_GOAL:.0%}", near >= ERROR_GOAL),
                goal(f"95 % interval holds the truth, {n} requests a probe", f"{held:.1%}",
                     f"its nominal {nominal:.0%} (>= {floor:.1%}, 1.645 SE of {seeds} seeds)",
                     held >= floor)]
        else:
            results += [
                info(f"capacity within 10 % of the truth, {n} requests a probe", error),
                info(f"95 % interval holds the truth, {n} requests a probe", f"{held:.1%}")]
        results += [
            info(f"interval within ±{SLO.precision_pct:g} %, {n} requests a probe",
                 f"{narrow:.1%}"),
            goal(f"low end at or below the truth, {n} requests a probe", f"{below:.1%}",
                 f">= {LOW_GOAL:.0%}", below >= LOW_GOAL),
            info(f"cost, {n} requests a probe",
                 f"{statistics.fmean(r.probes for r in runs):.1f} probes "
                 f"({statistics.fmean(r.refines for r in runs):.1f} refine), "
                 f"{statistics.fmean(r.arrival_s for r in runs) / 3600:.2f} h of arrivals"),
        ]
    results += fresh_cells(2 if args.smoke else args.seeds, args.smoke)
    return finish(results, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
