"""The dry run's estimate is one (issue 39 point 5): it comes from the best source at hand and
names it, and once a run of the sweep is stored (whatever its run id) it is within ±30 % of
the time that run took, measured here around the whole pytest process."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.commands import activated
from support.paths import REPO

pytestmark = pytest.mark.slow

SELECTION = ("--ppsweep-config", "pp4,pp8")


def _pytest(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "test_matrix", "-p", "no:cacheprovider",
                           *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=activated())
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def _estimate(reports: Path) -> str:
    out = _pytest(*SELECTION, "--ppsweep-reports", str(reports), "--ppsweep-dry-run").stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("estimated cluster time: "))
    return line.removeprefix("estimated cluster time: ")


def _seconds(text: str) -> float:
    found = re.match(r"about (\d+(?:\.\d+)?) (s|min|h) ", text)
    assert found, text
    return float(found.group(1)) * {"s": 1, "min": 60, "h": 3600}[found.group(2)]


def test_the_estimate_names_its_source_and_holds_once_a_run_is_stored(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    # No run yet: the seeds' figures for a Kimi-K3 model, at the emulator's time scale, as a
    # range with the boot bound beside it.
    first = _estimate(reports)
    assert re.match(r"about \d+ s to \d+ s \(the seeds' Kimi-K3 cluster .*338-538 s per boot.*"
                    r"at the emulator's time scale 100\); at most 60 min of boots \(2 boot\(s\) "
                    r"× boot_timeout_s 1800 s\)$", first), first
    assert not reports.exists()

    # A run under an id of the user's own (not <sweep>-YYYYmmdd-HHMMSS) is found all the same.
    started = time.monotonic()
    _pytest(*SELECTION, "--ppsweep-reports", str(reports), "--ppsweep-run-id", "my-own-id")
    took = time.monotonic() - started

    second = _estimate(reports)
    assert "expected durations from run(s) my-own-id" in second, second
    est = _seconds(second)
    assert abs(est / took - 1.0) <= 0.30, f"estimate {est:.1f} s vs measured {took:.1f} s: {second}"
