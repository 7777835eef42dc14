"""Long sweeps stay flat (CI's short version of benchmarks/bench_long_sweep.py): 6 points in one
pytest session; the plugin process's threads and open files must not grow per layout after the
first, its RSS by at most the benchmark's goal. The 64-point figures are in docs/RELIABILITY.md."""

from __future__ import annotations

import subprocess
import sys

from support.paths import REPO


def test_smoke_run_of_the_long_sweep_benchmark_is_flat() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_long_sweep.py"), "--smoke",
         "--port", "44640", "--net", "127.0.45"],
        capture_output=True, text=True, timeout=240, check=False, cwd=REPO)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and len(results) == 4, done.stdout + done.stderr
    assert all(line.endswith("| ok") for line in results), done.stdout
