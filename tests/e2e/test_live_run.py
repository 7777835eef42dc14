"""A live run reads as live (issue 39, point 2): the seeds' sweep running in a real process,
its first layout measured and the second booting, is ``running`` in ``runs``, ``show`` and the
rebuilt report (a snapshot that leaves the run's summary.csv and answers.json to the run): the
current layout and its phase, the finished point, the points not reached yet ``pending`` (never
INVALID, never "decided"). SIGTERMed there, it is ``interrupted``.

The second layout's boot is held for a while by the emulator's ``slow_start`` fault (its ranks
start late), so the checks look at a boot that is surely still going on; every wait is bounded
and polls the run folder's own progress.log.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.matrices import replace_once, seed_text
from support.paths import ACCEPTANCE, REPO
from support.processes import wait_until
from support.runs import rows

from pytest_ppsweep.results.status import INTERRUPTED_BOOT

PP1, PP2 = "pp1-tp32-ep4", "pp2-tp16-ep4"
PENDING = ["pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2"]
# PP2's ranks start this many emulated seconds late: 60 real seconds at 1000x, far longer than
# the checks below take; the test stops the sweep before it ends.
HELD_S = 60_000


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "pytest_ppsweep", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def _booting(reports: Path, layout: str) -> bool:
    """progress.log holds the layout's boot status line (its live status is written then)."""
    logs = list(reports.glob("*/progress.log")) if reports.is_dir() else []
    found = re.search(rf"\] {layout} booting \d+ s / ", logs[0].read_text()) if logs else None
    return found is not None


@pytest.mark.slow
def test_a_running_sweep_is_running_in_runs_show_and_the_report(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    folder.mkdir()
    held = f'env = {{ PPSWEEP_SIM_FAULTS = "slow_start={HELD_S}" }}\n'
    text = replace_once(seed_text(), "pp = 2\ntp = 16\n", f"pp = 2\ntp = 16\n{held}")
    (folder / "ppsweep.toml").write_text(text)
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    reports = tmp_path / "reports"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(folder), "--ppsweep-reports", str(reports),
         "--ppsweep-time-scale", "1000", "--ppsweep-spread-rule", "warn", "-p",
         "no:cacheprovider"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_until(lambda: proc.poll() is not None or _booting(reports, PP2), timeout_s=300,
                   interval_s=0.2, what=f"{PP2} to be booting")
        assert proc.poll() is None, "the sweep ended before its second layout booted"
        run = next(p for p in reports.iterdir() if p.is_dir())
        measured = {r["config_id"] for r in rows(run / "results.csv")}
        assert measured == {PP1}, measured  # the first layout measured, nothing of the second

        shown = _cli("show", run.name, "--reports", str(reports))
        assert shown.returncode == 0, shown.stderr
        out = shown.stdout
        assert f"run status: RUNNING, 1 of 5 layouts measured: {PP1}" in out, out
        assert re.search(rf"^now: {PP2} booting for \d+ s \(ranks ready \d/4", out, re.M), out
        assert f"pending: {', '.join(PENDING)}" in out, out
        assert "INVALID" not in out and "DECIDED" not in out and "boot failed" not in out, out
        assert "no configs.csv row" not in out, out
        # the finished point's medians are there, the answer is provisional
        assert re.search(r"^1 / 32 / 4 +8 ", out, re.M) and "[layout] RUNNING." in out, out
        assert f"{PP1} measured; nothing compared yet" in out, out

        listed = _cli("runs", "--reports", str(reports))
        assert listed.returncode == 0, listed.stderr
        assert f"  status: running, 1 of 5 layouts measured; now: {PP2} booting for" in (
            listed.stdout), listed.stdout
        assert "  answers: layout running" in listed.stdout, listed.stdout

        rebuilt = _cli("report", str(run))
        assert rebuilt.returncode == 0, rebuilt.stderr
        page = (run / "report-rebuilt.html").read_text()
        box = page[page.index('<div class="ppsweep-decision'):]
        box = box[:box.index("</div>")]
        assert 'data-status="running"' in box and "Running: nothing decided yet" in box, box
        assert 'data-run-status="running"' in box and f"now: {PP2} booting for" in box, box
        # the run's own files stay the run's: it writes summary.csv and answers.json at its
        # close, and the snapshot says so instead of writing them
        assert not (run / "answers.json").exists() and not (run / "summary.csv").exists()
        assert "summary: not written: the run is still running" in rebuilt.stdout, rebuilt.stdout
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            tail, _ = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            tail, _ = proc.communicate()
    # Stopped in PP2's boot, the run is interrupted there, and no longer reads as live.
    meta = json.loads((run / "metadata" / "run.json").read_text())
    assert meta["run_status"] == "interrupted", tail.decode(errors="replace")[-3000:]
    # the boot the signal stopped is that layout's interruption, not a failed boot
    assert meta["run_status_detail"]["interrupted_at"] == PP2, meta["run_status_detail"]
    pp2 = {r["config_id"]: r for r in rows(run / "configs.csv")}[PP2]
    assert pp2["boot_error"] == INTERRUPTED_BOOT, pp2
    assert not (run / "metadata" / "live").exists()
    after = _cli("show", run.name, "--reports", str(reports)).stdout
    assert f"run status: INTERRUPTED during {PP2}, after 1 of 5 layouts" in after, after
    assert "RUNNING" not in after and "boot failed" not in after, after
    assert "pending:" not in after and "now:" not in after, after
