"""Issue 25 end to end on the emulator, one layout, in two pytest runs (about 30 s): adaptive
repeats while the layout is up (extra rounds recorded and shown as extra), answers.json and the
report's answers above pytest-html's own sections, and a resume that counts the stored verdicts
in the exit code without booting the finished layout again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.outcomes import outcomes
from support.runs import rows

# A threshold of 0 is never met by measured rounds: every point takes its extra rounds up to
# max_repeats and stays INVALID, a verdict that must fail the exit code, resumed or not.
STRICT = {'spread_rule = "warn"': 'spread_rule = "fail"\nspread_threshold = 0.0\nmax_repeats = 3'}


def run(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*[str(a) for a in args], timeout=600)


def test_extra_rounds_answers_and_a_truthful_resume(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder, reports = sweep_dir(edits=STRICT), tmp_path / "reports"
    first = run(pytester, folder, "-v", "--ppsweep-config", "pp8", "--ppsweep-reports", reports,
                "--ppsweep-run-id", "strict")
    seen = outcomes(first.stdout.str())
    assert first.ret == 1, first.stdout.str()[-3000:]
    assert seen["test_valid[pp8-tp4-ep4-c2]"] == "FAILED"
    part = reports / "strict"
    got = rows(part / "results.csv")
    # 2 planned repeats + 1 extra per C, decided before teardown, recorded like any other
    assert sorted((r["concurrency"], r["repeat"], r["extra"]) for r in got) == [
        (c, r, "True" if r == "3" else "False") for c in ("2", "4") for r in ("1", "2", "3")]
    log = (part / "progress.log").read_text()
    assert "pp8-tp4-ep4 C=2: extra round 3 (up to 3): spread" in log
    assert log.index("extra round 3") < log.index("pp8-tp4-ep4 teardown")
    assert "(+1 extra)" in first.stdout.str()

    answers = json.loads((part / "answers.json").read_text())
    assert answers["format"] == "ppsweep-answers/1" and answers["run_id"] == "strict"
    (layout,) = answers["answers"]
    # one layout alone is measured, never decided: nothing was compared (issues 37/39)
    assert layout["kind"] == "layout" and layout["status"] == "measured"
    assert layout["answer"] == "pp8-tp4-ep4" and layout["objective"] == ["input_tps",
                                                                         "ttft_p50_s"]
    assert "Answers" in first.stdout.str()
    page = (part / "report.html").read_text()
    body = page.index("<body>") + len("<body>")
    assert page[body:].lstrip().startswith("<!--ppsweep-answers-->")
    assert page.index('id="ppsweep-answers"') < page.index('<h1 id="title">')

    resumed = run(pytester, folder, "-v", "--ppsweep-config", "pp8", "--ppsweep-reports",
                  reports, "--ppsweep-resume", part)
    again = outcomes(resumed.stdout.str())
    assert resumed.ret == 1, resumed.stdout.str()[-3000:]  # the same verdicts, the same code
    assert again["test_valid[pp8-tp4-ep4-c2]"] == "ERROR"
    assert "resumed point, judged from the run folder" in resumed.stdout.str()
    assert again["test_topology[pp8-tp4-ep4]"] == "REUSED"
    assert (part / "progress.log").read_text().count("pp8-tp4-ep4: booting on") == 1
