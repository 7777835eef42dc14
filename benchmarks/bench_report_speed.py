"""Time aggregation + report for 10,000 synthetic rounds against the 2 s target.

    .venv/bin/python benchmarks/bench_report_speed.py [--rounds 10000] [--smoke]

Generates a run folder (20 layouts x 5 concurrencies x N repeats, a few broken rounds so the
verdicts have failures to name), then times what ``python -m pytest_ppsweep report`` does:
load the CSVs, aggregate, judge, recommend, write summary.csv and the self-contained HTML, and
render the terminal summary. CSV generation is not timed. ``--smoke``: 500 rounds, timed once.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from benchkit.results import add_smoke, finish, goal

TARGET_S = 2.0
CONFIGS = 20
CONCURRENCIES = (1, 4, 8, 16, 32)


def make_run(run_dir: Path, rounds: int, seed: int = 7) -> None:
    """Write results.csv, configs.csv and metadata/run.json with ``rounds`` rows."""
    rng = np.random.default_rng(seed)
    repeats = max(rounds // (CONFIGS * len(CONCURRENCIES)), 1)
    ids = [f"pp{i + 1}-tp{max(32 // (i + 1), 1)}-ep4" for i in range(CONFIGS)]
    cid = np.repeat(ids, len(CONCURRENCIES) * repeats)
    conc = np.tile(np.repeat(CONCURRENCIES, repeats), CONFIGS)
    rep = np.tile(np.arange(1, repeats + 1), CONFIGS * len(CONCURRENCIES))
    n = len(cid)
    base_tps = np.repeat(rng.uniform(3000, 9000, CONFIGS), len(CONCURRENCIES) * repeats)
    tps = base_tps * rng.normal(1.0, 0.002, n)
    ttft = conc * 16384 / tps * rng.normal(1.0, 0.002, n)
    completed = np.where(rng.random(n) < 0.001, 39, 40)
    frame = pd.DataFrame({
        "run_id": "bench", "config_id": cid, "pp": 1, "tp": 32, "ep": 4, "concurrency": conc,
        "repeat": rep, "num_requests": 40, "completed": completed, "failed": 40 - completed,
        "duration_s": 40 * 16384 / tps, "input_tokens": 655_360, "input_tokens_nominal": 655_360,
        "input_tps": tps, "input_tps_nominal": tps, "output_tokens": 40, "ttft_mean_s": ttft,
        "ttft_p50_s": ttft, "ttft_p95_s": ttft * 1.1, "ttft_p99_s": ttft * 1.15,
        "e2e_mean_s": ttft, "e2e_p50_s": ttft, "e2e_p99_s": ttft * 1.2, "peak_concurrency": conc,
        "prompt_digest": "sha256:x", "time_scale": 100.0, "simulated": True, "reused": False,
    })
    (run_dir / "metadata").mkdir(parents=True, exist_ok=True)
    frame.to_csv(run_dir / "results.csv", index=False)
    pd.DataFrame({
        "config_id": ids, "pp": range(1, CONFIGS + 1), "tp": 1, "ep": 4, "order": range(CONFIGS),
        "boot_ok": True, "boot_s": rng.uniform(300, 500, CONFIGS), "boot_error": "",
        "topology_ok": True, "pp_max_micro_batch_size": "", "log_clean": True,
        "log_findings": "", "mem_peak_mib": rng.uniform(78_000, 83_000, CONFIGS),
        "mem_total_mib": 85_651, "mem_headroom_mib": np.nan, "mem_worst_node": "node0",
        "mem_worst_gpu": 0,
    }).to_csv(run_dir / "configs.csv", index=False)
    (run_dir / "metadata" / "run.json").write_text(json.dumps({
        "run_id": "bench", "baseline": ids[0], "order": ids, "simulated": True,
        "cluster": "bench", "image": "bench", "matrix": "bench.toml", "time_scale": 100.0,
        "sglang_version": None, "min_repeats": 3,
    }))


def main() -> int:
    """Generate, time, print seconds and the ratio to the 2 s target; exit 1 when over."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="timed repetitions (best is kept)")
    add_smoke(parser, "500 rounds, timed once")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.runs = 500, 1
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from pytest_ppsweep.report.html import rebuild_report
    from pytest_ppsweep.report.terminal import terminal_summary

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "bench"
        make_run(run_dir, args.rounds)
        rows = len(pd.read_csv(run_dir / "results.csv", usecols=["config_id"]))
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            _, summary, verdicts, rec = rebuild_report(run_dir)
            terminal_summary(summary, verdicts, rec)
            times.append(time.perf_counter() - start)
    best, worst = min(times), max(times)
    print(f"rounds: {rows}; aggregate+report: best {best:.3f} s, worst {worst:.3f} s "
          f"(of {args.runs}); target {TARGET_S:.1f} s; ratio best/target {best / TARGET_S:.2f}, "
          f"worst/target {worst / TARGET_S:.2f}")
    return finish([goal(f"aggregate+report of {rows} rounds, worst of {args.runs}",
                        f"{worst:.3f} s (best {best:.3f} s)", f"<= {TARGET_S:.1f} s",
                        worst <= TARGET_S)], args.smoke)


if __name__ == "__main__":
    sys.exit(main())
