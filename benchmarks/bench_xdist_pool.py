"""Wall time of the seeds' sweep on two emulated clusters with ``-n 2`` versus a serial run.

Runs the same sweep (test_matrix/ppsweep.toml's layouts and workload) twice, side by side in
one invocation: serially on cluster A, then with pytest-xdist on the pool A + B (one worker per
cluster). Prints both wall times and their ratio (goal ≤ 0.55). The emulator's time scale is a
parameter: at high scales the fixed costs (interpreter start, boots) dominate both runs.

    python benchmarks/bench_xdist_pool.py [--time-scale 100] [--requests 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLUSTER = """
[clusters.{name}]
kind = "local"
hosts = ["{net}.1", "{net}.2", "{net}.3", "{net}.4"]
gpus_per_node = 8
server_module = "pytest_ppsweep.sim"
port = 30100
dist_init_port = 20100
nvidia_smi = ["{{python}}", "-m", "pytest_ppsweep.sim.smi", "--host", "{{host}}"]
env = {{ PPSWEEP_SIM_TIME_SCALE = "{scale}", PPSWEEP_SIM_STATE_DIR = "{state}" }}
"""
POOL = (("bench-a", "127.0.16"), ("bench-b", "127.0.17"))


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--time-scale", type=float, default=100.0)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sweep"
        folder.mkdir()
        text = (REPO / "test_matrix" / "ppsweep.toml").read_text()
        for name, net in POOL:
            text += CLUSTER.format(name=name, net=net, scale=args.time_scale,
                                   state=Path(tmp) / "sim-state")
        (folder / "ppsweep.toml").write_text(text)
        (folder / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
        base = [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
                "--ppsweep-requests", str(args.requests), "--ppsweep-repeats", str(args.repeats)]
        serial = timed([*base, "--ppsweep-reports", f"{tmp}/s", "--ppsweep-cluster", "bench-a"],
                       folder)
        parallel = timed([*base, "--ppsweep-reports", f"{tmp}/p",
                          "--ppsweep-cluster", "bench-a,bench-b", "-n", "2"], folder)
    load = os.getloadavg()[0]
    print(f"serial (1 cluster):      {serial:7.1f} s")
    print(f"-n 2 (2 clusters):       {parallel:7.1f} s")
    print(f"ratio parallel / serial: {parallel / serial:7.3f}  (goal <= 0.55)")
    print(f"cores: {os.cpu_count()}, load average (1 min) at the end: {load:.2f}")


if __name__ == "__main__":
    main()
