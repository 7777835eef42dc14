"""What the correctness probe costs (issue 40.5): the seeds' sweep on the emulator with and
without ``[correctness]``, side by side.

Runs ``pytest`` on the seeds' sweep (test_matrix/ppsweep.toml, the shipped test_sweep.py) on one
emulated cluster of 4 loopback nodes, alternating a run with the probe (the default: 4 prompts ×
8 tokens, greedy, once per boot) and one with ``[correctness] enabled = false``, ``--runs``
times each, and reads each layout's cluster time (configs.csv ``held_s``: boot, the tests that
use its service, teardown; real seconds) from the run folders. It prints

* the ratio of Σ held_s with the probe to Σ held_s without it (goal < 1.05: the probe adds
  under 5 % to a layout's time), the median over the runs;
* the probe's own time per layout (its progress line) and its share of the layout's held_s.

    python benchmarks/bench_correctness_probe.py [--time-scale 100] [--runs 1] [--requests 40]
        [--repeats 3] [--config pp8] [--smoke]

``--smoke``: the PP8 layout alone, 2 repeats of 4 requests at time scale 400, on ports of its
own.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_orchestration import sweep_folder
from benchkit.results import Result, add_smoke, finish, goal, info

REPO = Path(__file__).resolve().parents[1]
GOAL = 1.05
PROBE_LINE = re.compile(r"(\S+): outputs probe: .*\((\d+(?:\.\d+)?) s\)")


def run_sweep(folder: Path, reports: Path, run_id: str,
              args: argparse.Namespace) -> tuple[dict[str, float], dict[str, float]]:
    """``pytest`` on the sweep; (held_s per layout, the probe's seconds per layout)."""
    cmd = [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
           "--ppsweep-cluster", "bench-orch", "--ppsweep-reports", str(reports),
           "--ppsweep-run-id", run_id, "--ppsweep-time-scale", str(args.time_scale),
           "--ppsweep-requests", str(args.requests), "--ppsweep-repeats", str(args.repeats),
           "--ppsweep-spread-rule", "warn",
           *(["--ppsweep-config", args.config] if args.config else [])]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "benchmarks")])}
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, check=False)
    run = reports / run_id
    if done.returncode not in (0, 1) or not (run / "configs.csv").exists():
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    if done.returncode:
        print(f"  note: {done.stdout.strip().splitlines()[-1]}", file=sys.stderr)
    with (run / "configs.csv").open(newline="") as fh:
        held = {r["config_id"]: float(r["held_s"]) for r in csv.DictReader(fh) if r["held_s"]}
    log = run / "progress.log"
    probe = {m[1]: float(m[2]) for m in PROBE_LINE.finditer(log.read_text())} if (
        log.exists()) else {}
    return held, probe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-scale", type=float, default=100.0)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--net", default="127.0.47", help="loopback /24 of the 4 nodes")
    ap.add_argument("--port", type=int, default=43900, help="HTTP port (rendezvous: +100)")
    ap.add_argument("--config", help="only these layouts (--ppsweep-config), e.g. pp8")
    add_smoke(ap, "PP8 alone, 2 repeats of 4 requests, time scale 400")
    args = ap.parse_args()
    if args.smoke:
        args.config, args.requests, args.repeats, args.time_scale = "pp8", 4, 2, 400.0
        args.port = 44100
    ratios: list[float] = []
    shares: list[float] = []
    probe_s: list[float] = []
    totals: dict[str, list[float]] = {"with": [], "without": []}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        folder = sweep_folder(base, args.net, args.port, REPO)
        toml = folder / "ppsweep.toml"
        plain = toml.read_text()
        for i in range(args.runs):
            held: dict[str, dict[str, float]] = {}
            for mode in ("with", "without"):
                print(f"[{time.strftime('%H:%M:%S')}] run {i + 1}/{args.runs}: {mode} the probe",
                      file=sys.stderr, flush=True)
                toml.write_text(plain if mode == "with" else
                                plain + "\n[correctness]\nenabled = false\n")
                held[mode], probe = run_sweep(folder, base / "reports", f"{mode}-{i}", args)
                if mode == "with":
                    for cid, s in probe.items():
                        probe_s.append(s)
                        if held[mode].get(cid):
                            shares.append(s / held[mode][cid])
            common = sorted(set(held["with"]) & set(held["without"]))
            on = sum(held["with"][c] for c in common)
            off = sum(held["without"][c] for c in common)
            totals["with"].append(on)
            totals["without"].append(off)
            ratios.append(on / off if off else float("nan"))
    ratio = statistics.median(ratios)
    print(f"the seeds' sweep on the emulator: time scale {args.time_scale:g}, {args.requests} "
          f"requests × {args.repeats} repeats; real seconds, {args.runs} run(s) each way")
    print(f"  Σ held_s with the probe    {statistics.median(totals['with']):8.2f} s")
    print(f"  Σ held_s without the probe {statistics.median(totals['without']):8.2f} s")
    print(f"  ratio {ratio:.3f} (goal < {GOAL})")
    if probe_s:
        print(f"  the probe itself: median {statistics.median(probe_s):.3f} s a layout, "
              f"{statistics.median(shares):.2%} of its held_s")
    figures: list[Result] = [
        goal("layout time with the probe over without", f"{ratio:.3f} (median of {args.runs} "
             "run(s))", f"< {GOAL}", ratio < GOAL),
        info("the probe's own time per layout",
             f"{statistics.median(probe_s):.3f} s" if probe_s else "n/a"),
        info("the probe's share of a layout's held_s",
             f"{statistics.median(shares):.2%}" if shares else "n/a"),
    ]
    return finish(figures, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
