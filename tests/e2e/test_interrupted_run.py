"""An interrupted run says so (issue 39, point 1): the seeds' sweep (test_matrix/ppsweep.toml on
the emulator) SIGTERMed in a real process once its first layout finished is ``interrupted`` in
run.json, decides nothing in answers.json nor on the terminal, and prints the exact command
that resumes it; the resumed run measures the rest, is ``complete`` and answers as an
uninterrupted run does."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO
from support.processes import wait_until
from support.runs import rows, run_dir

PP1, PP2 = "pp1-tp32-ep4", "pp2-tp16-ep4"
LAYOUTS = [PP1, PP2, "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2"]


def _meta(run: Path) -> dict[str, Any]:
    data = json.loads((run / "metadata" / "run.json").read_text())
    assert isinstance(data, dict)
    return data


def _second_layout_started(reports: Path) -> bool:
    """progress.log says the second layout boots: the first one's tests and teardown ended."""
    logs = list(reports.glob("*/progress.log")) if reports.is_dir() else []
    return bool(logs) and f"{PP2}: booting on" in logs[0].read_text()


@pytest.mark.slow
def test_a_sigterm_after_the_first_layout_is_an_interrupted_run_that_resumes(
    tmp_path: Path,
) -> None:
    reports = tmp_path / "reports"
    args = [str(REPO / "test_matrix"), "--ppsweep-reports", str(reports),
            "--ppsweep-time-scale", "1000",
            # at 1000x a round lasts a fraction of a real second: its spread is the machine's
            "--ppsweep-spread-rule", "warn", "-p", "no:cacheprovider"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_until(lambda: proc.poll() is not None or _second_layout_started(reports),
                   timeout_s=300, what=f"{PP2} to start booting")
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        proc.send_signal(signal.SIGTERM)
        raw, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = raw.decode(errors="replace")
    assert proc.returncode != 0, out[-3000:]
    run = run_dir(reports)
    meta = _meta(run)
    assert meta["run_status"] == "interrupted", out[-3000:]
    detail = meta["run_status_detail"]
    assert detail["measured"] == [PP1], detail
    assert detail["missing"] == LAYOUTS[1:], detail
    assert detail["interrupted_at"] in (PP2, None), detail  # in its boot, or right before it
    resume = shlex.join(["pytest", *args, "--ppsweep-resume", run.name])
    assert detail["resume"] == resume
    # The terminal: the status and the exact resume command; no decision, no "boot failed"
    # for the layout the signal stopped.
    assert "run status: INTERRUPTED" in out and f"after 1 of {len(LAYOUTS)} layouts" in out
    assert f"resume: {resume}" in out
    assert "DECIDED" not in out and "boot failed" not in out, out[-4000:]
    # the layouts it never reached are not run: never INVALID, in no view or count
    assert "no configs.csv row" not in out, out[-4000:]
    answers = json.loads((run / "answers.json").read_text())["answers"]
    assert answers and all(a["status"] != "decided" for a in answers), answers
    layout = next(a for a in answers if a["kind"] == "layout")
    assert layout["status"] == "interrupted" and layout["answer"] is None
    assert layout["text"].startswith(f"interrupted after 1 of 5 layouts: {PP1} measured; "
                                     "nothing compared"), layout["text"]
    configs = {r["config_id"]: r for r in rows(run / "configs.csv")}
    assert "boot failed" not in configs.get(PP2, {}).get("boot_error", "")

    # The resume command, as printed, measures the rest: the run is complete and decides.
    resumed = subprocess.run(
        [sys.executable, "-m", *shlex.split(resume)], cwd=tmp_path, capture_output=True,
        text=True, timeout=600, check=False, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert resumed.returncode == 0, resumed.stdout[-4000:]
    meta = _meta(run)
    assert meta["run_status"] == "complete", meta.get("run_status_detail")
    assert meta["run_status_detail"]["measured"] == LAYOUTS
    assert meta["run_status_detail"]["resume"] is None
    done = rows(run / "results.csv")
    assert sorted({r["config_id"] for r in done}) == sorted(LAYOUTS) and len(done) == 5 * 2 * 3
    final = json.loads((run / "answers.json").read_text())["answers"]
    layout = next(a for a in final if a["kind"] == "layout")
    assert layout["status"] in ("decided", "inconclusive"), layout
    assert "run status: COMPLETE, 5 of 5 layouts measured" in resumed.stdout

    # ... and answers as an uninterrupted run of the same sweep does.
    whole = tmp_path / "whole"
    straight = subprocess.run(
        [sys.executable, "-m", "pytest", *args[:2], str(whole), *args[3:]], cwd=tmp_path,
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert straight.returncode == 0, straight.stdout[-4000:]
    assert _meta(run_dir(whole))["run_status"] == "complete"
    uninterrupted = json.loads((run_dir(whole) / "answers.json").read_text())["answers"]
    same = ("kind", "workload", "excluded")
    assert [({k: a[k] for k in same}, sorted(a["ranking"])) for a in final] == [
        ({k: a[k] for k in same}, sorted(a["ranking"])) for a in uninterrupted]
    for mine, theirs in zip(final, uninterrupted, strict=True):
        _same_within_noise(mine, theirs)


def _same_within_noise(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two answers of the same sweep agree: the same decision, or, where the machine's noise at
    1000x left one of them unable to separate its top points (inconclusive), the other's
    decision is among those top points."""
    assert {a["status"], b["status"]} <= {"decided", "inconclusive"}, (a, b)
    if a["status"] == b["status"] == "decided":
        assert a["answer"] == b["answer"], (a, b)
    elif a["status"] != b["status"]:
        decided, unsure = (a, b) if a["status"] == "decided" else (b, a)
        assert decided["answer"] in unsure["ranking"][:2], (a, b)
