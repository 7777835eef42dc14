"""An image that computes wrong outputs, gated against a good one, fails in every view: the
gate's rows and its table (a line for the outputs, one for the task scores), gate.csv, the
history (``gate`` fails, ``correctness`` is ``disagree``), ``runs``, ``show``, ``trend``, the
report's first box, and ``bisect`` (a bad image). The two runs are the seeds' run, equally fast;
only the new image's outputs differ from the old one's (every layout of it alike, so they agree
with each other: only the gate can see it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.runs import seed_run

from pytest_ppsweep.gate.bisect import BAD, GOOD, judge, regressed_points
from pytest_ppsweep.gate.comparison import (
    WRONG,
    compare,
    notable_lines,
    write_comparison_csv,
)
from pytest_ppsweep.gate.history import History, gate_result, trend_lines
from pytest_ppsweep.report.cli import main, show_lines
from pytest_ppsweep.report.html import build_report
from pytest_ppsweep.report.summary import gate_table
from pytest_ppsweep.results.accuracy import LayoutAccuracy
from pytest_ppsweep.results.outputs import LayoutOutputs, PromptOutput

LAYOUTS = ("pp1-tp32-ep4", "pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2")
GOOD_RUN, BAD_RUN = "kimi-20261201-090000", "kimi-20261202-090000"


def _outputs(run: Path, ids: tuple[int, ...]) -> None:
    for cid in LAYOUTS:
        top = tuple(((t, -0.1), (t + 100, -3.0)) for t in ids)
        LayoutOutputs(cid, (PromptOutput("The capital of France is", ids,
                                         tuple(-0.1 for _ in ids), top),), 0.1, 0.2).write(run)


def _reports(tmp_path: Path, *, bad_ids: tuple[int, ...] = (7, 8, 9)) -> Path:
    reports = tmp_path / "reports"
    good = seed_run(reports / GOOD_RUN, sweep="kimi3-pp", image="reg/sglang:v1",
                    run_status="complete")
    bad = seed_run(reports / BAD_RUN, sweep="kimi3-pp", image="reg/sglang:v2",
                   run_status="complete")
    _outputs(good, (1, 2, 3))
    _outputs(bad, bad_ids)
    write_comparison_csv(bad, compare(bad, good))
    return reports


def test_the_gate_has_a_wrong_row_per_layout_and_a_line_for_outputs_and_accuracy(
        tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    rows = compare(reports / BAD_RUN, reports / GOOD_RUN)
    outputs = [r for r in rows if r.metric == "outputs"]
    assert [(r.config_id, r.concurrency, r.verdict) for r in outputs] == [
        (c, 0, WRONG) for c in LAYOUTS]
    assert outputs[0].message.startswith(
        f"pp1-tp32-ep4: outputs wrong against the reference run {GOOD_RUN}: prompt 0 ")
    table = gate_table(rows, width=120)
    assert "outputs: WRONG on 5 of 5 layouts (pp1-tp32-ep4, " in table[-3]
    assert table[-2].startswith("accuracy: not compared")
    assert any(line.startswith("WRONG pp8-tp4-ep4: outputs wrong") for line in
               notable_lines(rows))
    assert gate_result(reports / BAD_RUN) == "fail: outputs"


def test_a_sound_image_agrees_and_passes(tmp_path: Path) -> None:
    reports = _reports(tmp_path, bad_ids=(1, 2, 3))
    rows = compare(reports / BAD_RUN, reports / GOOD_RUN)
    assert {r.verdict for r in rows if r.metric == "outputs"} == {"agree"}
    assert gate_table(rows)[-3] == "outputs: agree on 5 of 5 layouts"
    assert not gate_result(reports / BAD_RUN).startswith("fail")
    assert History(reports).records()[0].correctness == "agree"


def test_the_task_score_has_its_row(tmp_path: Path) -> None:
    reports = _reports(tmp_path, bad_ids=(1, 2, 3))
    for run, correct in ((GOOD_RUN, 58), (BAD_RUN, 5)):
        for cid in LAYOUTS:
            LayoutAccuracy(cid, "builtin", 60, correct, 0, 0.05, 0.2, 0.03, 60, 0.0, "d",
                           "tasks.jsonl").write(reports / run)
    rows = compare(reports / BAD_RUN, reports / GOOD_RUN)
    assert {r.verdict for r in rows if r.metric == "accuracy"} == {WRONG}
    write_comparison_csv(reports / BAD_RUN, rows)
    assert gate_result(reports / BAD_RUN) == "fail: accuracy"
    assert any(line.startswith("accuracy: WRONG on 5 of 5 layouts") for line in gate_table(rows))


def test_history_runs_show_and_trend_mark_the_wrong_image(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = _reports(tmp_path)
    new, old = History(reports).records()
    assert (new.image, new.gate, new.correctness) == ("reg/sglang:v2", "fail: outputs",
                                                      "disagree")
    assert (old.gate, old.correctness) == ("—", "agree")
    assert main(["runs", "--reports", str(reports)]) == 0
    listed = capsys.readouterr().out
    assert "fail: outputs" in next(line for line in listed.splitlines() if BAD_RUN in line)
    shown = show_lines(reports / BAD_RUN, width=150)
    assert shown[1].startswith("GATE FAILED: this image computes wrong outputs on 5 of 5 "
                               "layouts"), shown[:3]
    trend = trend_lines(History(reports).trend("kimi3-pp", "input_tps", "pp8-tp4-ep4"),
                        "input_tps")
    marked = [line for line in trend if "WRONG" in line]
    assert marked and all(BAD_RUN in line for line in marked), trend
    assert not any(GOOD_RUN in line and "WRONG" in line for line in trend)
    from pytest_ppsweep.report.trendview import html_section

    chart = html_section(reports / BAD_RUN, "kimi3-pp", BAD_RUN)
    assert 'class="run current wrong"' in chart and "WRONG: outputs disagree" in chart
    assert chart.count(" wrong\"") == chart.count('class="run current wrong"')


def test_the_reports_first_box_is_red(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    page = build_report(reports / BAD_RUN).read_text()
    box = page[page.index('<div class="ppsweep-decision'):]
    assert box.startswith('<div class="ppsweep-decision none" data-gate="fail"'), box[:200]
    assert "Do not use this image" in box[:400]
    good = build_report(reports / GOOD_RUN).read_text()
    assert '<p class="use">Use <b>' in good and 'data-gate="fail"' not in good


def test_bisect_judges_the_wrong_image_bad(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    rows = compare(reports / BAD_RUN, reports / GOOD_RUN)
    regressed = regressed_points(rows)
    assert ("pp8-tp4-ep4", 0, "outputs") in regressed
    assert judge("v2", reports / BAD_RUN, reports / GOOD_RUN, regressed, None,
                 reused=True).state == BAD
    assert judge("v1", reports / GOOD_RUN, reports / GOOD_RUN, regressed, None,
                 reused=True).state == GOOD


def test_trend_marks_only_the_layout_whose_outputs_disagree(tmp_path: Path) -> None:
    """No gate: in the new run PP8 alone disagrees with the run's reference layout. Its points
    are marked in ``trend``; PP4's are not (its numbers are sound)."""
    reports = _reports(tmp_path, bad_ids=(1, 2, 3))
    (reports / BAD_RUN / "gate.csv").unlink()
    top = tuple(((t, -0.1), (t + 100, -3.0)) for t in (7, 8, 9))
    LayoutOutputs("pp8-tp4-ep4", (PromptOutput("The capital of France is", (7, 8, 9),
                                               (-0.1,) * 3, top),), 0.1, 0.2).write(
        reports / BAD_RUN)
    history = History(reports)
    pp8 = trend_lines(history.trend("kimi3-pp", "input_tps", "pp8-tp4-ep4"), "input_tps")
    pp4 = trend_lines(history.trend("kimi3-pp", "input_tps", "pp4-tp8-ep4"), "input_tps")
    assert [line for line in pp8 if "WRONG: outputs disagree" in line] and all(
        BAD_RUN in line for line in pp8 if "WRONG" in line)
    assert not any("WRONG" in line for line in pp4), pp4
