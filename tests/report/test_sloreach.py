"""When no layout meets the SLO, what would (report/sloreach.py; issue 37, point 8): the
planner's predicted TTFT floor per layout and chunk size, each with its 90 % interval, or why
the model cannot say. On the stored seeds' sweep (five layouts, C = 8 and 16) with every search
below its minimum."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from support.paths import REPO
from support.slo import searched

from pytest_ppsweep.report import sloreach, sloview

SEEDS = REPO / "tests" / "data" / "answers" / "ppsweep"
LAYOUTS = ("pp1-tp32-ep4", "pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2")


def _run(tmp_path: Path, limits: list[dict[str, object]], met: str | None = None) -> Path:
    run = tmp_path / "run"
    shutil.copytree(SEEDS, run)
    meta_path = run / "metadata" / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["workload"]["slo"] = {"limits": limits}
    meta_path.write_text(json.dumps(meta))
    for cid in LAYOUTS:
        searched(run, cid, 0.3 if cid == met else None, None)
    return run


P50 = [{"metric": "ttft", "percentile": 50, "limit_s": 5.0}]


@pytest.fixture(scope="module")
def missed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("missed"), P50)


@pytest.fixture(scope="module")
def missed(missed_run: Path) -> list[str]:
    return sloreach.terminal_lines(missed_run)


def test_no_layout_met_it_names_the_changes_that_would_with_their_intervals(
        missed: list[str]) -> None:
    assert missed[0] == ("No layout meets TTFT p50 ≤ 5 s (workload default) at the loads "
                         "searched. What would meet it:")
    assert "a fit on this run's measured rounds, at 16384-token prompts" in missed[2]
    found = [line for line in missed if re.match(r"    pp\d+-tp\d+ at chunked_prefill_size", line)]
    assert found, missed
    # where the prediction holds (zero load), and the values no layout of the run measured
    assert "each holds at zero load only (one request at a time, an empty queue" in missed[2]
    assert any(line.endswith("(predicted: never measured)") for line in found), found
    for line in found:
        m = re.search(r"one request at a time ([\d.]+) s \(90 % interval ([\d.]+)-([\d.]+) s\): "
                      r"(would|might) meet", line)
        assert m, line
        value, lo, hi = (float(m.group(i)) for i in (1, 2, 3))
        assert lo <= value <= hi
        # would: the whole interval within 5 s; might: only its lower end
        assert (hi <= 5.0) if m.group(4) == "would" else (lo <= 5.0 < hi), line


def test_nothing_to_say_when_a_layout_met_it_and_the_model_says_what_it_cannot(
        tmp_path: Path) -> None:
    assert sloreach.terminal_lines(_run(tmp_path / "a", P50, met="pp8-tp4-ep4")) == []
    p99 = _run(tmp_path / "b", [{"metric": "tpot", "percentile": 99, "limit_s": 0.05}])
    lines = sloreach.terminal_lines(p99)
    assert lines[-1] == ("  the model cannot say: it predicts TTFT p50/p95 of prefill rounds, "
                         "not tpot p99")


def test_the_report_and_the_terminal_show_it(missed_run: Path, missed: list[str]) -> None:
    shown = sloview.terminal_lines(missed_run)
    assert all(line in shown for line in missed)
    html = sloview.html_section(missed_run)
    assert "<h4>What would meet the SLO</h4>" in html and "would meet" in html
