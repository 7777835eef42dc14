"""report/summary.render reads the run folder's other files once and hands them to every view;
a view given those files reads nothing from disk."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support.slo import searched

from pytest_ppsweep.folder.runfolder import FolderFiles, RunFolder
from pytest_ppsweep.report import commview, plannerview, sloview
from pytest_ppsweep.report.summary import render


def test_render_reads_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    searched(run, "pp8-tp4-ep4", 0.45, 0.6)
    searched(run, "pp4-tp8-ep4", 0.2, 0.3)
    reads: list[str] = []
    for name in ("read_run_json", "slo_probes", "slo_outcomes", "comm_rows", "smi_texts",
                 "plan_rows", "planner_profile"):
        real = getattr(RunFolder, name)

        def counted(self: RunFolder, *args: object, _real: object = real, _name: str = name,
                    **kwargs: object) -> object:
            reads.append(_name)
            return _real(self, *args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(RunFolder, name, counted)
    rendered = render(run, None, "no summary: no rounds")
    assert any("SLO searches" in line for line in rendered.terminal)
    assert sorted(reads) == sorted(["read_run_json", "slo_probes", "slo_outcomes", "comm_rows",
                                    "smi_texts", "plan_rows", "planner_profile"])


def test_a_view_given_the_files_reads_no_folder(tmp_path: Path) -> None:
    files = FolderFiles(tmp_path / "absent", meta={}, probes=[], outcomes=[], comm=[
        {"config_id": "pp1-tp2-ep1", "domain": "tp0", "label": "NV18", "size_bytes": "134217728",
         "time_us": "500", "busbw_gbs": "300", "algbw_gbs": "150", "tool": "torch",
         "simulated": "True"}], smi={}, plan=[], planner_profile={"misfit": ["pp2-tp4 C=8"]},
        accuracy={}, attributions={}, rounds=[])
    assert commview.comm_terminal(files)[0] == commview.COMM_TITLE
    assert sloview.html_section(files) == "" and sloview.terminal_lines(files) == []
    planner = plannerview.terminal_lines(files, 60)  # the misfit text wraps to the width
    assert "  misfit: pp2-tp4 C=8" in planner and all(len(x) <= 60 for x in planner), planner
    comm = commview.comm_terminal(files, 60)  # wider than 60 side by side: each row's values
    assert all(len(x) <= 60 for x in comm), comm  # under its layout and domain
    assert any("pp1-tp2-ep1" in x for x in comm), comm
    row = {"layout": "pp8-tp4-ep4", "concurrency": "8", "input_tps_pred": "1000",
           "input_tps_lo90": "900", "input_tps_hi90": "1100", "state": "predicted, not measured"}
    planned = dataclasses.replace(files, plan=[row], planner_profile={})
    for width in (60, 100):
        table = plannerview.terminal_lines(planned, width)
        assert all(len(x) <= width for x in table) and "1,000 [900, 1,100]" in "".join(table)


def test_the_status_lines_wrap_to_the_width_but_the_resume_command_stays_whole() -> None:
    """The run's status at the end of the terminal summary: its lines within the width (a long
    list of points not measured wraps), the resume command on one line, to be copied whole."""
    from pytest_ppsweep.report.summary import status_lines
    from pytest_ppsweep.results.status import RunStatus

    ids = [f"pp{n}-tp{64 // n}-ep4" for n in (1, 2, 4, 8, 16)]
    resume = ("pytest test_matrix --ppsweep-matrix test_matrix/a2a.toml --ppsweep-reports "
              "reports --ppsweep-resume kimi3-a2a-20261205-063101")
    status = RunStatus("partial", tuple(ids[:1]), tuple(ids[1:]), resume=resume,
                       expected=(ids[-1],))
    lines = status_lines(status, 60)
    assert lines[-1] == f"resume: {resume}" and len(lines[-1]) > 60
    assert all(len(line) <= 60 for line in lines[:-1]) and len(lines) > 2, lines
    assert lines[0].startswith("run status: PARTIAL, 1 of 5 layouts measured;")
    assert " ".join(" ".join(lines[:-1]).split()) == " ".join(status.lines()[0].split())
    assert "pp16-tp4-ep4 (failed as expected)" in " ".join(" ".join(lines).split())
