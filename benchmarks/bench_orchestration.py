"""What the orchestration costs: the seeds' sweep on the emulator, its wall time over the work.

Runs ``pytest`` on the seeds' sweep (test_matrix/ppsweep.toml: PP1…PP16 × C=8/16 × 3 repeats ×
40 requests of 16,384 tokens, the shipped test_sweep.py) on one emulated cluster of 4 loopback
nodes and reads the run folder it made. The work is what a sweep cannot do without, measured in
the same run: Σ boot time (configs.csv ``boot_s``: until every rank is healthy) + Σ round time
(results.csv ``duration_s``: the measured requests), both in real seconds (÷ ``time_scale``).
It prints

* the ratio of the sweep's wall time to the work (goal <= 1.03): the sweep from its first
  layout's first step to its last layout's last step, and the whole ``pytest`` command
  (interpreter start, collection and the report included);
* where the rest goes, per phase, from the run's ``metadata/phases.json`` (launch, warm-up,
  flush, results, snapshots, log scan, teardown; ``between`` is pytest and the tests' own
  checks between the phases) and the command's start and report;
* with ``--against DIR`` the same for another checkout (e.g. the main branch, run with
  ``PYTHONPATH=DIR``), alternating the two ``--runs`` times so that both see the same load.

    python benchmarks/bench_orchestration.py [--time-scale 100] [--runs 1] [--against DIR]
        [--requests 40] [--repeats 3] [--config pp8] [--warn] [--smoke]

``--smoke``: the PP8 layout alone, 2 repeats of 4 requests at time scale 400 (a spread over the
threshold is a warning), on ports of its own.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from benchkit.results import Result, add_smoke, finish, goal, info

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.matrices import seed_text  # noqa: E402

CLUSTER = """
[clusters.bench-orch]
kind = "local"
hosts = ["{net}.1", "{net}.2", "{net}.3", "{net}.4"]
gpus_per_node = 8
server_module = "pytest_ppsweep.sim"
port = {port}
dist_init_port = {dist_port}
nvidia_smi = ["{{python}}", "-m", "pytest_ppsweep.sim.smi", "--host", "{{hosts}}"]
env = {{ PPSWEEP_SIM_PROFILE = "kimi-k3-6000d", PPSWEEP_SIM_STATE_DIR = "{state}" }}
"""
OVERHEAD = ("launch", "server info", "warm-up", "flush", "results", "snapshots", "log scan",
            "teardown")  # fmt: skip
GOAL = 1.03


@dataclass
class Sweep:
    """One run of the sweep: its wall times, its work and where the rest went (seconds)."""

    command_s: float
    span_s: float
    boot_s: float
    round_s: float
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def work_s(self) -> float:
        return self.boot_s + self.round_s


def sweep_folder(tmp: Path, net: str, port: int, tree: Path) -> Path:
    """The seeds' sweep plus the benchmark's cluster, for ``tree``'s plugin (a tree whose
    snapshots do not know ``{hosts}`` asks node by node: ``{host}``)."""
    homes = (tree / "pytest_ppsweep/cluster/gpus.py", tree / "pytest_ppsweep/measure/gpu.py")
    one_call = any(p.exists() and "HOSTS_PLACEHOLDER" in p.read_text() for p in homes)
    folder = tmp / ("sweep" if one_call else "sweep-per-node")
    folder.mkdir(exist_ok=True)
    # self-contained (cluster.toml's tables inlined): a tree from before `extends` reads it too
    text = seed_text()
    # each tree's emulator its own GPU state files: their format may differ between trees
    state = tmp / f"sim-state-{zlib.crc32(str(tree.resolve()).encode()):08x}"
    text += CLUSTER.format(net=net, port=port, dist_port=port + 100, state=state)
    if not one_call:
        text = text.replace('"{hosts}"', '"{host}"')
    (folder / "ppsweep.toml").write_text(text)
    (folder / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
    return folder


def run_sweep(folder: Path, reports: Path, tree: Path, args: argparse.Namespace) -> Sweep:
    """``pytest`` on the sweep with ``tree``'s pytest_ppsweep; what its run folder says."""
    run_id = f"orch-{len(list(reports.glob('*'))) if reports.exists() else 0}"
    cmd = [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
           "--ppsweep-cluster", "bench-orch", "--ppsweep-reports", str(reports),
           "--ppsweep-run-id", run_id, "--ppsweep-time-scale", str(args.time_scale),
           "--ppsweep-requests", str(args.requests), "--ppsweep-repeats", str(args.repeats),
           *(["--ppsweep-spread-rule", "warn"] if args.warn else []),
           *(["--ppsweep-config", args.config] if args.config else [])]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "benchmarks")])}
    start_wall, start = time.time(), time.perf_counter()
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, check=False)
    command_s, end_wall = time.perf_counter() - start, time.time()
    # 1: some test failed (a spread over the threshold on a busy machine): timed all the same
    if done.returncode not in (0, 1) or not (reports / run_id / "results.csv").exists():
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    if done.returncode:
        print(f"  note: {done.stdout.strip().splitlines()[-1]}", file=sys.stderr)
    run = reports / run_id
    with (run / "configs.csv").open(newline="") as fh:
        configs = list(csv.DictReader(fh))
    with (run / "results.csv").open(newline="") as fh:
        rounds = list(csv.DictReader(fh))
    scale = float(rounds[0]["time_scale"]) if rounds else args.time_scale
    boot = sum(float(c["boot_s"]) for c in configs) / scale
    measured = sum(float(r["duration_s"]) for r in rounds) / scale
    phases_file = run / "metadata" / "phases.json"
    rows = json.loads(phases_file.read_text()) if phases_file.exists() else {}
    phases: dict[str, float] = {}
    span = command_s
    if rows:
        first = min(float(r["start"]) for r in rows.values())
        last = max(float(r["end"]) for r in rows.values())
        span = last - first
        for phase in OVERHEAD:
            phases[phase] = sum(float(r.get(phase, 0.0)) for r in rows.values())
        counted = sum(phases.values()) + sum(
            float(r.get(p, 0.0)) for r in rows.values() for p in ("boot", "round")
        )
        phases["between"] = span - counted
        phases["pytest start"] = first - start_wall
        phases["report and exit"] = end_wall - last
    return Sweep(command_s, span, boot, measured, phases)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def show(name: str, runs: list[Sweep]) -> list[Result]:
    work = median([r.work_s for r in runs])
    span = median([r.span_s for r in runs])
    command = median([r.command_s for r in runs])
    print(f"{name}: {len(runs)} run(s), medians")
    print(f"  work: boot {median([r.boot_s for r in runs]):6.1f} s + rounds "
          f"{median([r.round_s for r in runs]):6.1f} s = {work:6.1f} s")
    print(f"  sweep   (first layout step → last) {span:6.1f} s   ratio {span / work:.3f}   "
          f"(goal <= {GOAL})")
    print(f"  command (pytest start → exit)      {command:6.1f} s   ratio {command / work:.3f}")
    if all(r.phases for r in runs):
        print("  where the rest goes (s):")
        for phase in runs[0].phases:
            print(f"    {phase:<16} {median([r.phases[phase] for r in runs]):6.2f}")
    else:
        print("  (no metadata/phases.json in this tree's runs: no per-phase breakdown)")
    label = "" if name == "this tree" else f"{name}: "
    return [
        info(f"{label}work (Σ boot + Σ rounds)", f"{work:.1f} s"),
        goal(f"{label}sweep wall time over its work", f"{span / work:.3f} ({span:.1f} s over "
             f"{work:.1f} s, median of {len(runs)} run(s))", f"<= {GOAL}", span / work <= GOAL),
        info(f"{label}command wall time over the work", f"{command / work:.3f}"),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-scale", type=float, default=100.0)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--against", type=Path, help="another checkout to measure alongside")
    ap.add_argument("--net", default="127.0.45", help="loopback /24 of the 4 nodes")
    ap.add_argument("--port", type=int, default=43500, help="HTTP port (rendezvous: +100)")
    ap.add_argument("--config", help="only these layouts (--ppsweep-config), e.g. pp8")
    ap.add_argument("--warn", action="store_true",
                    help="--ppsweep-spread-rule warn (cut-down workloads are noisy)")
    add_smoke(ap, "PP8 alone, 2 repeats of 4 requests, time scale 400")
    args = ap.parse_args()
    if args.smoke:
        args.config, args.requests, args.repeats, args.time_scale = "pp8", 4, 2, 400.0
        args.warn, args.port = True, 43700
    trees = {"this tree": REPO}
    if args.against is not None:
        trees[f"against {args.against}"] = args.against.resolve()
    results: dict[str, list[Sweep]] = {name: [] for name in trees}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for name, tree in trees.items():
                print(f"[{time.strftime('%H:%M:%S')}] run {i + 1}/{args.runs}: {name}",
                      file=sys.stderr, flush=True)
                folder = sweep_folder(Path(tmp), args.net, args.port, tree)
                results[name].append(run_sweep(folder, Path(tmp) / "reports", tree, args))
                load.append(os.getloadavg()[0])
    print(f"the seeds' sweep on the emulator: time scale {args.time_scale:g}, "
          f"{args.requests} requests × {args.repeats} repeats; real seconds")
    figures = [f for name, runs in results.items() for f in show(name, runs)]
    print(f"cores: {os.cpu_count()}, load average (1 min) before/after each run: "
          + " ".join(f"{x:.2f}" for x in load))
    figures.append(info("load average (1 min) before/after each run",
                        " ".join(f"{x:.2f}" for x in load) + f" on {os.cpu_count()} cores"))
    return finish(figures, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
