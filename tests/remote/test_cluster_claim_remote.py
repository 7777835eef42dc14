"""One sweep per cluster on the SSH test hosts (cluster/claim.py: a claim file on each node,
written over SSH): two pytest sessions started together on the same four hosts take turns, never
overlap, and both finish with N/N results. The emulator cluster's twin (with the refused third
run) is tests/reliability/test_cluster_claim_e2e.py."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from support.paths import REPO
from support.processes import child_env
from support.remote import small_matrix

ONE_LAYOUT = "\n[[configs]]\npp = 4\ntp = 8\n"


def _span(run: Path) -> tuple[float, float]:
    rows = json.loads((run / "metadata" / "phases.json").read_text())
    return (min(float(r["start"]) for r in rows.values()),
            max(float(r["end"]) for r in rows.values()))


def test_two_sessions_on_the_ssh_hosts_take_turns(
    sweep_folder: Callable[..., Path], work: dict[str, Path], tmp_path: Path
) -> None:
    folder = sweep_folder(small_matrix("ns", work["model"], None, configs=ONE_LAYOUT),
                          launcher="process")
    reports = tmp_path / "reports"
    env = {**child_env(), "PYTHONPATH": str(REPO)}
    procs = {run: subprocess.Popen(
        [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
         "--ppsweep-reports", str(reports), "--ppsweep-run-id", run, "--ppsweep-repeats", "1",
         "--ppsweep-requests", "2", "--ppsweep-wait-cluster", "300", "-k", "not c4"],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for run in ("ssh-a", "ssh-b")}
    try:
        outs = {run: p.communicate(timeout=400)[0] for run, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs.values()), {r: o[-3000:] for r, o in outs.items()}
    (a0, a1), (b0, b1) = _span(reports / "ssh-a"), _span(reports / "ssh-b")
    assert a1 <= b0 or b1 <= a0, f"the runs overlapped: a {a0}-{a1}, b {b0}-{b1}"
    second = "ssh-b" if a1 <= b0 else "ssh-a"
    log = (reports / second / "progress.log").read_text()
    assert "waiting" in log and "cluster 'ns' is in use by run ssh-" in log, log[-2000:]
    for run in procs:
        with (reports / run / "results.csv").open(newline="") as fh:
            rounds = list(csv.DictReader(fh))
        assert rounds and all(r["completed"] == r["num_requests"] == "2" and r["failed"] == "0"
                              for r in rounds), rounds
