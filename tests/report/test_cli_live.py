"""``runs`` and ``show`` on a run folder that is still being written (issue 39, point 2): a folder
with only run.json (the run's first second) is ``running`` with nothing measured, points not
reached are ``pending``; a run.json that says running while its process is gone is
``interrupted``, with the resume command its process recorded. The live sweep itself:
tests/e2e/test_live_run.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.runs import SEED_LAYOUTS, config_row, rounds, seed_points, write_run

from pytest_ppsweep.folder.runfolder import LiveRecord, RunFolder
from pytest_ppsweep.report.cli import find_runs, runs_lines, show_lines
from pytest_ppsweep.report.html import build_report
from pytest_ppsweep.results.livestatus import folder_status

IDS = list(SEED_LAYOUTS)
RESUME = "pytest test_matrix --ppsweep-resume kimi3-pp-20261204-100000"


def _dead_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _meta(run: Path, pid: int, **more: Any) -> None:
    path = run / "metadata" / "run.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = json.loads(path.read_text()) if path.is_file() else {
        "format_version": 2, "run_id": run.name, "sweep": "kimi3-pp", "order": IDS,
        "baseline": IDS[0]}
    meta |= {"order": IDS, "run_status": "running", "run_status_detail": None,
             "owner": {"host": socket.gethostname(), "pid": pid, "resume": RESUME}, **more}
    path.write_text(json.dumps(meta))


def test_a_folder_with_only_run_json_is_running_with_nothing_measured(tmp_path: Path) -> None:
    run = tmp_path / "kimi3-pp-20261204-100000"
    _meta(run, os.getpid())
    lines = show_lines(run)
    assert lines[1] == "run status: RUNNING, 0 of 5 layouts measured"
    assert f"pending: {', '.join(IDS)}" in lines and "nothing measured yet" in lines
    assert not any("error" in line or "missing file" in line for line in lines), lines
    found, skipped = find_runs(tmp_path)
    assert skipped == []
    listed = runs_lines(found, width=100)
    assert "  status: running, 0 of 5 layouts measured" in listed, listed


def test_a_running_folder_names_the_busy_layout_and_the_pending_ones(tmp_path: Path) -> None:
    run = tmp_path / "kimi3-pp-20261204-100000"
    first = [p for p in seed_points() if p.config_id == IDS[0]]
    spec = SEED_LAYOUTS[IDS[0]]
    write_run(run, [r for p in first for r in rounds(p)],
              [config_row(IDS[0], *spec[:3], 0, spec[3])])
    _meta(run, os.getpid(), selected={cid: [8, 16] for cid in IDS})
    record = LiveRecord(RunFolder(run), socket.gethostname())
    record.set(IDS[1], "booting", "ranks ready 2/4 | loading weights", 100.0)
    status = folder_status(run)
    assert status is not None and status.status == "running"
    assert status.measured == (IDS[0],) and status.pending == tuple(IDS[2:])
    lines = status.lines(now=112.0)
    assert lines == [f"run status: RUNNING, 1 of 5 layouts measured: {IDS[0]}",
                     f"now: {IDS[1]} booting for 12 s (ranks ready 2/4 | loading weights)",
                     f"pending: {', '.join(IDS[2:])}"]
    text = "\n".join(show_lines(run))
    assert "INVALID" not in text and "DECIDED" not in text, text
    assert f"{IDS[0]} measured; nothing compared yet" in text, text
    # between two steps the layout is still the current one
    record.pause(IDS[1], 120.0)
    assert folder_status(run).lines(now=121.0)[1] == (  # type: ignore[union-attr]
        f"now: {IDS[1]} booted, between tests for 1 s")
    # a live record of a process that has ended (an earlier session's) says nothing
    stale = LiveRecord(RunFolder(run), socket.gethostname(), pid=_dead_pid())
    stale.set(IDS[4], "booting", "", 100.0)
    record.done(IDS[1], 130.0)
    assert folder_status(run).now == ()  # type: ignore[union-attr]


def test_running_in_run_json_with_its_process_gone_is_interrupted(tmp_path: Path) -> None:
    run = tmp_path / "kimi3-pp-20261204-100000"
    _meta(run, _dead_pid())
    status = folder_status(run)
    assert status is not None and status.status == "interrupted"
    assert status.resume == RESUME and "has ended without closing the run" in status.note
    lines = show_lines(run)
    assert lines[1].startswith("run status: INTERRUPTED, after 0 of 5 layouts; not measured: "
                               f"{IDS[0]}, "), lines
    assert f"resume: {RESUME}" in lines and "nothing measured" in lines, lines
    assert not any("missing file" in line for line in lines), lines
    assert not any(line.startswith(("now:", "pending:")) for line in lines), lines


def test_a_folder_without_a_run_status_has_none(tmp_path: Path) -> None:
    run = write_run(tmp_path / "old", [r for p in seed_points() for r in rounds(p)], [])
    assert "run_status" not in json.loads((run / "metadata" / "run.json").read_text())
    assert folder_status(run) is None
    assert not any(line.startswith("run status:") for line in show_lines(run))


def test_show_and_the_rebuilt_report_are_qualified_by_a_partial_status(tmp_path: Path) -> None:
    three = IDS[:2] + IDS[3:4]
    points = [p for p in seed_points() if p.config_id in three]
    configs = [config_row(cid, *SEED_LAYOUTS[cid][:3], i, SEED_LAYOUTS[cid][3])
               for i, cid in enumerate(three)]
    run = write_run(tmp_path / "part", [r for p in points for r in rounds(p)], configs,
                    order=IDS, run_status="partial",
                    run_status_detail={"measured": three, "missing": [IDS[2], IDS[4]],
                                       "interrupted_at": None, "resume": RESUME})
    text = "\n".join(show_lines(run))
    assert "run status: PARTIAL, 3 of 5 layouts measured; not measured: " in text, text
    assert "DECIDED" not in text and f"decided among 3 of 5 layouts: {IDS[3]}" in text, text
    assert f"resume: {RESUME}" in text
    build_report(run)
    answers = json.loads((run / "answers.json").read_text())["answers"]
    assert [a["status"] for a in answers] == ["partial"], answers
    page = (run / "report-rebuilt.html").read_text()
    assert 'data-run-status="partial"' in page and 'data-status="decided"' not in page
