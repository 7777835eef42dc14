"""Wall time of the seeds' sweep on two emulated clusters with ``-n 2`` versus a serial run.

Runs the same sweep (test_matrix/ppsweep.toml's layouts and workload) three times, side by side
in one invocation: serially on cluster A; with pytest-xdist on the pool A + B (one worker per
cluster) without history, so every layout weighs the same in the pool plan; and again with the
serial run in the same reports folder, so the plan uses the cluster time each layout took there
(how a sweep that is run again, e.g. to gate a new image, is planned). Prints the wall times and
the ratios to the serial run (goal <= 0.55 for the planned run), and the same ratio for cluster
time alone (the busiest cluster's sum of ``held_s`` over the serial run's sum), which is what
the plan decides; the difference is per-run fixed cost (interpreter and xdist worker start,
collection, the report), a few seconds that the emulator's time scale magnifies: at scale 50
the seeds' sweep takes ~2 min serially instead of ~2 h on the real cluster.

    python benchmarks/bench_xdist_pool.py [--time-scale 50] [--requests 40] [--repeats 3] [--smoke]

``--smoke``: PP8 alone (one worker idles), 1 round of 2 requests at time scale 1000 (a spread
over the threshold is a warning), on ports of its own, and no run without history (the planned
run goes through the same code).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchkit.results import add_smoke, finish, goal, info

REPO = Path(__file__).resolve().parents[1]
CLUSTER = """
[clusters.{name}]
kind = "local"
hosts = ["{net}.1", "{net}.2", "{net}.3", "{net}.4"]
gpus_per_node = 8
server_module = "pytest_ppsweep.sim"
port = {port}
dist_init_port = {dist_port}
nvidia_smi = ["{{python}}", "-m", "pytest_ppsweep.sim.smi", "--host", "{{hosts}}"]
env = {{ PPSWEEP_SIM_TIME_SCALE = "{scale}", PPSWEEP_SIM_STATE_DIR = "{state}" }}
"""
POOL = (("bench-a", "127.0.16"), ("bench-b", "127.0.17"))


@dataclass
class Run:
    wall_s: float
    plan: list[str]  # the pool plan from the run's progress log
    cluster_s: dict[str, float]  # cluster → sum of its layouts' held_s


def timed(cmd: list[str], cwd: Path, reports: Path) -> Run:
    """Run ``cmd``; its wall time and what the run folder it made says."""
    before = set(reports.glob("*/progress.log"))
    start = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    # 1: some test failed (a spread over the threshold on a busy machine): timed all the same
    if res.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}")
    if res.returncode:
        print(f"  note: {res.stdout.strip().splitlines()[-1]}", file=sys.stderr)
    (log,) = set(reports.glob("*/progress.log")) - before
    plan = [ln.split("] ", 1)[1] for ln in log.read_text().splitlines() if "] plan " in ln]
    held: dict[str, float] = {}
    with (log.parent / "configs.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            held[row["cluster"]] = held.get(row["cluster"], 0.0) + float(row["held_s"])
    return Run(elapsed, plan, held)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--time-scale", type=float, default=50.0)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--config", help="only these layouts (--ppsweep-config), e.g. pp4,pp8")
    ap.add_argument("--port", type=int, default=30100, help="HTTP port (rendezvous: -10000)")
    add_smoke(ap, "PP8 alone, 1 round of 2 requests, time scale 1000")
    args = ap.parse_args()
    extra: list[str] = []
    if args.smoke:
        args.config, args.requests, args.repeats, args.time_scale = "pp8", 2, 1, 1000.0
        args.port, extra = 30110, ["--ppsweep-spread-rule", "warn"]
    if args.config:
        extra += ["--ppsweep-config", args.config]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sweep"
        folder.mkdir()
        text = (REPO / "test_matrix" / "ppsweep.toml").read_text()
        for name, net in POOL:
            text += CLUSTER.format(name=name, net=net, scale=args.time_scale, port=args.port,
                                   dist_port=args.port - 10000,
                                   state=Path(tmp) / "sim-state")
        (folder / "ppsweep.toml").write_text(text)
        (folder / "cluster.toml").write_text((REPO / "test_matrix" / "cluster.toml").read_text())
        (folder / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
        base = [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
                "--ppsweep-requests", str(args.requests), "--ppsweep-repeats", str(args.repeats),
                *extra]
        pool = ["--ppsweep-cluster", "bench-a,bench-b", "-n", "2"]
        runs, fresh = Path(tmp) / "runs", Path(tmp) / "fresh"
        serial = timed(
            [*base, "--ppsweep-reports", str(runs), "--ppsweep-cluster", "bench-a"], folder, runs
        )
        cold = (None if args.smoke
                else timed([*base, "--ppsweep-reports", str(fresh), *pool], folder, fresh))
        planned = timed([*base, "--ppsweep-reports", str(runs), *pool], folder, runs)
    load = os.getloadavg()[0]
    work = sum(serial.cluster_s.values())
    print(f"time scale {args.time_scale:g}; wall time, and cluster time of the busiest cluster "
          "(sum of held_s); ratios to the serial run")
    shown = {"serial (1 cluster)": serial, "-n 2, no history": cold, "-n 2, planned": planned}
    for name, run in ((n, r) for n, r in shown.items() if r is not None):
        busiest = max(run.cluster_s.values())
        print(f"  {name:<20} wall {run.wall_s:6.1f} s  ratio {run.wall_s / serial.wall_s:.3f}   "
              f"cluster {busiest:6.1f} s  ratio {busiest / work:.3f}")
    print("goal: planned wall ratio <= 0.55")
    if cold is not None:
        print("plan without history:", *cold.plan, sep="\n  ")
    print("plan from the serial run:", *planned.plan, sep="\n  ")
    print(f"cores: {os.cpu_count()}, load average (1 min) at the end: {load:.2f}")
    busiest = max(planned.cluster_s.values())
    return finish([
        goal("-n 2 planned wall time over serial", f"{planned.wall_s / serial.wall_s:.3f} "
             f"({planned.wall_s:.1f} s over {serial.wall_s:.1f} s)", "<= 0.55",
             planned.wall_s / serial.wall_s <= 0.55),
        info("-n 2 no-history wall time over serial",
             f"{cold.wall_s / serial.wall_s:.3f}" if cold else "not run (--smoke)"),
        info("-n 2 planned busiest cluster time over serial", f"{busiest / work:.3f}"),
        info("load average (1 min) at the end", f"{load:.2f} on {os.cpu_count()} cores"),
    ], args.smoke)


if __name__ == "__main__":
    sys.exit(main())
