"""Does the SLO search's capacity figure hold? (issue 37, points 7 and 9)

A queue model of the seeds' 16K prefill server, no servers, seconds: one FIFO server whose every
request takes the same prefill time ``S = input_len / TPS`` (16,384 tokens at 8,800 tok/s, the
seeds' PP8 throughput: S = 1.86 s; an M/D/1 queue: Poisson arrivals, deterministic service,
no batching, the modelled assumption), TTFT = the wait in the queue + S. Its true capacity under
"TTFT p50 ≤ 5 s" is the rate whose steady-state median TTFT is 5 s, found once by a long
simulation (200,000 requests) and bisection.

Each seed runs the plugin's own search (measure/slosearch.Search: min 0.05, max 2.0 req/s,
precision 0.05, 8 probes, 3 repeats, the high end confirmed) with the plugin's own probe verdict
(measure/withinslo: the warm-up and drain trimmed, the percentile judged with the binomial
bound at 95 %). Every probe starts from an empty queue and draws its own arrival stream, as the
plugin's probes do. Figures, per probe size (requests a probe):

- **capacity error**: the share of seeds whose found low end is within ±10 % of the truth
  (goal ≥ 90 % at the size a precise answer needs; the seeds' 40 is shown beside it);
- **coverage**: the share of seeds whose bracket [low, high) holds the truth; the low end is a
  load shown within at 95 % on every repeat, so it should lie below the truth in ≥ 95 % of
  seeds (goal), the whole bracket holding it less often when the precision is finer than the
  noise;
- **cost**: the mean number of probes and the mean arrival time they take (cluster seconds).

    python benchmarks/bench_slo_capacity.py [--seeds 100] [--smoke]

``--smoke``: 8 seeds and two probe sizes (its rates mean nothing; the code path is the same).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchkit.results import Result, add_smoke, finish, goal, info  # noqa: E402

from pytest_ppsweep.matrix.slospec import SloLimit  # noqa: E402
from pytest_ppsweep.measure.slosearch import Search  # noqa: E402
from pytest_ppsweep.measure.withinslo import judge_percentile  # noqa: E402

INPUT_LEN, TPS = 16384, 8800.0  # the seeds' 16K prompts on PP8 (seeds §5)
SERVICE_S = INPUT_LEN / TPS
LIMIT = SloLimit("ttft", 50, 5.0)
CONFIDENCE, TRIM = 0.95, 0.1
MIN, MAX, PRECISION, PROBES, REPEATS = 0.05, 2.0, 0.05, 8, 3
ERROR_GOAL, COVER_GOAL = 0.90, 0.95


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


def probe(rate: float, n: int, rng: random.Random) -> bool:
    """The plugin's verdict on one probe: the warm-up and drain trimmed, the binomial bound."""
    values = ttfts(rate, n, rng)
    cut = math.floor(n * TRIM)
    kept = values[cut:n - cut] if cut and n > 2 * cut else values
    return judge_percentile(kept, LIMIT, CONFIDENCE)[0] == "within"


def one_search(seed: int, n: int) -> tuple[float | None, float | None, int, float]:
    """(low, high, probes, arrival seconds) of one search with probes of ``n`` requests."""
    search = Search(MIN, MAX, PRECISION, PROBES, repeats=REPEATS)
    spent = 0.0
    while (step := search.next()) is not None:
        k = len(search.probes) + 1
        spent += n / step[0]
        search.record(step[0], probe(step[0], n, random.Random(seed * 1000 + k)))
    out = search.outcome()
    return out.low, out.high, len(search.probes), spent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, default=100)
    add_smoke(ap, "8 seeds, probes of 40 and 400 requests")
    args = ap.parse_args()
    seeds = 8 if args.smoke else args.seeds
    sizes = (40, 400) if args.smoke else (40, 200, 400, 1000)
    truth = true_capacity()
    results: list[Result] = [info("true capacity, TTFT p50 ≤ 5 s, M/D/1 at S = 1.86 s",
                                  f"{truth:.3f} req/s")]
    for n in sizes:
        runs = [one_search(s, n) for s in range(1, seeds + 1)]
        lows = [low for low, _h, _p, _t in runs]
        near = sum(low is not None and abs(low / truth - 1) <= 0.10 for low in lows) / seeds
        below = sum(low is None or low <= truth for low in lows) / seeds
        held = sum((low or 0.0) <= truth < (high if high is not None else math.inf)
                   for low, high, _p, _t in runs) / seeds
        found = sorted(low for low in lows if low is not None)
        span = f"{found[0]:.2f}-{found[-1]:.2f}" if found else "none"
        results += [
            goal(f"capacity within 10 % of the truth, {n} requests a probe", f"{near:.0%} of "
                 f"{seeds} seeds (found {span} req/s)", f">= {ERROR_GOAL:.0%}", near >= ERROR_GOAL),
            goal(f"low end at or below the truth, {n} requests a probe", f"{below:.0%}",
                 f">= {COVER_GOAL:.0%}", below >= COVER_GOAL),
            info(f"bracket holds the truth, {n} requests a probe", f"{held:.0%}"),
            info(f"cost, {n} requests a probe", f"{statistics.fmean(p for *_, p, _t in runs):.1f} "
                 f"probes, {statistics.fmean(t for *_, t in runs) / 3600:.2f} h of arrivals"),
        ]
    return finish(results, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
