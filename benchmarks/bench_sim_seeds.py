"""How close the emulator and the planner's cost model come to the seeds' table (issue 26).

For every point of the seeds' §7 table (PP1-PP16 at C=8 and C=16, 40 requests of 16,384 -> 1
tokens; benchmarks/data/seeds_medians.csv, both seed files, source named there):

1. **The emulator**: the virtual-time benchmark of its scheduler (sim/model/vbench.py, the
   scheduler the server runs, jitter included), the median of ``--repeats`` seeded rounds as the
   seeds took the median of three. Printed per point: the error of Input TPS, TTFT p50 and TTFT
   p95; the figures are the largest error of each over the table (goal: every point within 5 %).
2. **The planner's mirror** (planner/roundcost.py at the emulator profile's values): its largest
   difference from the emulator's rounds (goal <= 1 %, what tests/planner/test_fitting.py
   holds it to) and its time per point (what a fit pays thousands of times).

    python benchmarks/bench_sim_seeds.py [--repeats 3] [--smoke]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_ppsweep.planner.roundcost import PARAMS, Hardware, Point, predict_log  # noqa: E402
from pytest_ppsweep.sim.model.placement import Layout  # noqa: E402
from pytest_ppsweep.sim.model.profile import load_profile  # noqa: E402
from pytest_ppsweep.sim.model.vbench import make_scheduler, run_round  # noqa: E402

SEEDS = REPO / "benchmarks" / "data" / "seeds_medians.csv"
METRICS = ("input_tps", "ttft_p50_s", "ttft_p95_s")
BOUND = 0.05
MIRROR_BOUND = 0.01


def seeds_points() -> list[dict[str, str]]:
    with SEEDS.open(encoding="utf-8") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def emulated(pp: int, tp: int, ep: int, c: int, repeats: int, jitter: bool = True
             ) -> tuple[float, float, float]:
    """Median Input TPS, TTFT p50 and p95 of ``repeats`` seeded virtual-time rounds."""
    profile = load_profile("kimi-k3-6000d")
    if not jitter:
        from dataclasses import replace

        profile = replace(profile, scheduler=replace(profile.scheduler, jitter_frac=0.0))
    runs = []
    for seed in range(repeats):
        sched = make_scheduler(profile, Layout(tp=tp, pp=pp, ep=ep, nnodes=4), seed=seed)
        r = run_round(sched, prompt_tokens=16384, output_tokens=1, concurrency=c,
                      num_requests=40)
        runs.append((r.input_tps, float(np.percentile(r.ttft_s, 50)),
                     float(np.percentile(r.ttft_s, 95))))
    tps, p50, p95 = (statistics.median(col) for col in zip(*runs, strict=True))
    return tps, p50, p95


def result(name: str, value: str, goal: str, ok: bool | None) -> str:
    if ok is None:
        return f"RESULT {name}: {value} | info"
    return f"RESULT {name}: {value} | goal {goal} | {'ok' if ok else 'not ok'}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="seeded rounds per point (median)")
    ap.add_argument("--smoke", action="store_true",
                    help="one round per point, the same code path (a few seconds)")
    args = ap.parse_args(argv)
    repeats = 1 if args.smoke else max(args.repeats, 1)
    started = time.monotonic()
    theta = np.log([p.prior for p in PARAMS])
    worst = dict.fromkeys(METRICS, 0.0)
    mirror = 0.0
    print(f"seeds' table vs the emulator (median of {repeats} seeded round(s)) and the planner")
    print(f"  {'layout':<14}{'C':>4}" + "".join(f"{m:>14}" for m in METRICS)
          + f"{'planner vs emulator':>22}")
    for row in seeds_points():
        pp, tp, ep, c = (int(row[k]) for k in ("pp", "tp", "ep", "concurrency"))
        got = emulated(pp, tp, ep, c, repeats)
        errs = [g / float(row[m]) - 1 for g, m in zip(got, METRICS, strict=True)]
        for m, e in zip(METRICS, errs, strict=True):
            worst[m] = max(worst[m], abs(e))
        plain = emulated(pp, tp, ep, c, 1, jitter=False)
        mine = np.exp(predict_log(theta, Point(pp, tp, c), Hardware()))
        diff = max(abs(a / b - 1) for a, b in zip(mine, plain, strict=True))
        mirror = max(mirror, diff)
        print(f"  {row['config_id']:<14}{c:>4}" + "".join(f"{e:>+14.1%}" for e in errs)
              + f"{diff:>22.2%}")
    point = Point(16, 2, 16)
    predict_log(theta, point, Hardware())
    t0 = time.perf_counter()
    for _ in range(50):
        predict_log(theta, point, Hardware())
    per_point_ms = (time.perf_counter() - t0) / 50 * 1e3
    print(f"bench_sim_seeds: {time.monotonic() - started:.1f} s")
    names = {"input_tps": "Input TPS", "ttft_p50_s": "TTFT p50", "ttft_p95_s": "TTFT p95"}
    for m in METRICS:
        print(result(f"emulator max abs error vs seeds, {names[m]}", f"{worst[m]:.1%}",
                     f"<= {BOUND:.0%} on every point", worst[m] <= BOUND))
    print(result("planner mirror max abs difference vs emulator", f"{mirror:.2%}",
                 f"<= {MIRROR_BOUND:.0%}", mirror <= MIRROR_BOUND))
    print(result("planner model time per point (PP16, C=16)", f"{per_point_ms:.2f} ms",
                 "none", None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
