"""benchmarks/bench_orchestration.py runs (cut down to one layout and two short rounds) and
prints its ratio and where the rest of the wall time goes; the figures themselves are the
benchmark's to measure, not this test's."""

from __future__ import annotations

import re
import subprocess
import sys

from support.paths import REPO

BENCH = REPO / "benchmarks" / "bench_orchestration.py"


def test_the_benchmark_prints_its_ratio_and_every_phase() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--config", "pp8", "--requests", "4", "--repeats", "2",
         "--time-scale", "400", "--warn", "--net", "127.0.45", "--port", "43700"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )
    out = done.stdout
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    work = re.search(r"work: boot +([\d.]+) s \+ rounds +([\d.]+) s", out)
    assert work and float(work[1]) > 0 and float(work[2]) > 0, out
    assert re.search(r"sweep +\(first layout step → last\) +[\d.]+ s +ratio \d\.\d{3} +\(goal", out)
    assert re.search(r"command \(pytest start → exit\) +[\d.]+ s +ratio \d\.\d{3}", out)
    for phase in ("launch", "warm-up", "flush", "snapshots", "log scan", "teardown", "between",
                  "pytest start", "report and exit"):
        assert re.search(rf"^    {re.escape(phase)} +-?[\d.]+$", out, flags=re.M), (phase, out)
    assert "load average" in out
