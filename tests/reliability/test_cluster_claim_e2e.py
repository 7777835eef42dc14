"""One sweep per cluster (cluster/claim.py), end to end: two pytest sessions started together on
the same emulated cluster never overlap and both finish with correct results (the second waits,
--ppsweep-wait-cluster); a third without the option is refused before anything is launched,
naming the holder, and leaves no run folder; a run whose claim is taken over mid-run fails
the rounds measured since. The SSH hosts' twin is
tests/remote/test_cluster_claim_remote.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.matrices import emulated_cluster, sweep_head, workload
from support.paths import REPO
from support.processes import child_env, wait_until

from pytest_ppsweep.cluster.claim import CLAIM_DIR

NET, PORT = "127.0.48", 45100  # this file's loopback net and ports (45100-45101)
CONFIG = """
[[configs]]
pp = 1
tp = 8
"""


def _sweep(state: Path) -> str:
    """One layout (PP1 × TP8) on one emulated node, 2 requests at C=2, time scale 1000."""
    return (sweep_head("claim", CONFIG, cluster="shared", boot_timeout_s=120)
            + workload(1024, (2,), 2, 1)
            + emulated_cluster("shared", NET, PORT, PORT + 1, 1000, state, nodes=1))


def _pytest(folder: Path, run_id: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
           "--ppsweep-reports", str(folder / "reports"), "--ppsweep-run-id", run_id, *extra]
    env = {**child_env(), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _span(run: Path) -> tuple[float, float]:
    rows = json.loads((run / "metadata" / "phases.json").read_text())
    return (min(float(r["start"]) for r in rows.values()),
            max(float(r["end"]) for r in rows.values()))


def test_two_sessions_on_one_cluster_take_turns(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(_sweep(tmp_path / "state"))
    (folder / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
    claim = Path(CLAIM_DIR, f"{NET}.1.json")
    claim.unlink(missing_ok=True)
    first, second = (_pytest(folder, run, "--ppsweep-wait-cluster", "240")
                     for run in ("run-a", "run-b"))
    try:
        wait_until(claim.exists, 60, "one of the two sessions' claim on node 0")
        holder = json.loads(claim.read_text())["run_id"]
        third = _pytest(folder, "run-c")
        out_c, _ = third.communicate(timeout=120)
        out_a, _ = first.communicate(timeout=300)
        out_b, _ = second.communicate(timeout=300)
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
    assert (first.returncode, second.returncode) == (0, 0), out_a[-3000:] + out_b[-3000:]
    assert third.returncode == 4, out_c[-3000:]
    assert f"cluster 'shared' is in use by run {holder} of " in out_c, out_c[-2000:]
    assert "nothing was launched" in out_c
    # the error alone: no summary line, and no run folder (nothing was recorded)
    assert "no summary" not in out_c and not (folder / "reports" / "run-c").exists(), out_c
    reports = folder / "reports"
    (a0, a1), (b0, b1) = _span(reports / "run-a"), _span(reports / "run-b")
    assert a1 <= b0 or b1 <= a0, f"the runs overlapped: a {a0}-{a1}, b {b0}-{b1}"
    waited = out_b if a1 <= b0 else out_a
    assert "waiting" in (reports / ("run-b" if a1 <= b0 else "run-a") / "progress.log"
                         ).read_text(), waited[-2000:]
    for run in ("run-a", "run-b"):
        rows = (reports / run / "results.csv").read_text().splitlines()
        assert len(rows) == 2 and ",2,2,0," in rows[1], rows  # one round, 2/2 completed
    assert not claim.exists(), "the claim outlived both runs"


LOST_NET, LOST_PORT = "127.0.49", 45110  # the lost-claim test's loopback net and ports


def test_a_claim_taken_over_mid_run_fails_the_rounds_measured_since(tmp_path: Path) -> None:
    """A run whose claim another run takes over (its machine asleep past the stale time: here
    the claim file is overwritten by a holder that is not this run) finds out at its next
    heartbeat: it records the loss, and every point with a round measured since is INVALID
    ("the cluster was shared"), so its tests fail."""
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(
        sweep_head("lost", CONFIG, cluster="asleep", boot_timeout_s=120)
        + workload(1024, (2, 4), 8, 3)
        + emulated_cluster("asleep", LOST_NET, LOST_PORT, LOST_PORT + 1, 100, tmp_path / "st",
                           nodes=1))
    (folder / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
    claim = Path(CLAIM_DIR, f"{LOST_NET}.1.json")
    claim.unlink(missing_ok=True)
    run = _pytest(folder, "run-asleep")
    try:
        wait_until(claim.exists, 60, "the run's claim")
        thief = json.loads(claim.read_text()) | {"run_id": "run-thief", "user": "bob",
                                                 "host": "h9", "token": "thief"}
        claim.write_text(json.dumps(thief))
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
        claim.unlink(missing_ok=True)
    lost = json.loads((folder / "reports" / "run-asleep" / "metadata" / "claim_lost.json")
                      .read_text())
    assert lost["asleep"]["why"] == "the claim was taken over by run run-thief of bob@h9", lost
    assert run.returncode == 1, out[-3000:]
    assert "the cluster was shared: the claim was taken over by run run-thief" in out, out[-3000:]
