"""Issue 37 points 3 and 5 end to end on the emulator, one run of two layouts with
``[compare] sequential`` and the emulator's one-request fault (``fail_request_n``):

- PP4 is measured first: it leads at each C with PP8 still to come, so it takes sequential
  rounds up to ``max_repeats`` (4) while it is up; one of its C=4 requests fails, the round is
  kept and replaced, and the point stays VALID with a warning (test_prefill passes, warning);
- PP8 misses N/N at C=2 in round 1 and again in its replacement round 3: INVALID at C=2 only,
  answered per C (PP4 at C=2, where PP8 is invalid; both compared at C=4).

Request numbers (the emulator counts every /generate of a boot, from 1): one warm-up request,
then 6 a round. PP4: C=2 takes 4 rounds (requests 2-25), C=4 round 2 is 32-37: 34 fails.
PP8: round 1 of C=2 is 2-7 (3 fails), round 2 8-13, the replacement 14-19 (16 fails)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.outcomes import outcomes
from support.runs import rows

pytestmark = pytest.mark.slow

PP4, PP8 = "pp4-tp8-ep4", "pp8-tp4-ep4"
CONFIGS = """
[[configs]]
pp = 4
tp = 8
env = { PPSWEEP_SIM_FAULTS = "fail_request_n=34" }

[[configs]]
pp = 8
tp = 4
env = { PPSWEEP_SIM_FAULTS = "fail_request_n=3,fail_request_n=16" }
"""


def test_replaced_round_sequential_rounds_and_the_per_c_answer(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder = sweep_dir(CONFIGS, edits={'spread_rule = "warn"':
                                       'spread_rule = "warn"\nmax_repeats = 4'})
    toml = folder / "ppsweep.toml"
    toml.write_text(toml.read_text() + "\n[compare]\nsequential = true\n")
    reports = tmp_path / "reports"
    result = pytester.runpytest_subprocess(str(folder), "-v", "-rw", "--ppsweep-reports",
                                           str(reports), "--ppsweep-run-id", "rep",
                                           timeout=600)
    text = result.stdout.str()
    seen = outcomes(text)
    assert result.ret == 1, text[-4000:]  # PP8 at C=2 failed twice: its tests fail
    assert seen[f"test_prefill[{PP4}-c4]"] == "PASSED", text[-4000:]
    assert seen[f"test_valid[{PP4}-c4]"] == "PASSED"
    assert seen[f"test_prefill[{PP8}-c2]"] == "FAILED"
    assert seen[f"test_valid[{PP8}-c2]"] == "FAILED"
    assert seen[f"test_valid[{PP8}-c4]"] == "PASSED"
    result.stdout.fnmatch_lines([f"*replaced round: {PP4} C=4 repeat 2: 5/6 completed, 1 failed*"])
    # the answer's paragraph shows it (wrapped at the terminal's width: where depends on the
    # words before it)
    assert "Per C (each C at α / 2): " in " ".join(text.split())

    run = reports / "rep"
    got = [(r["config_id"], r["concurrency"], r["repeat"], r["completed"])
           for r in rows(run / "results.csv")]
    # PP4: sequential rounds to the cap at both Cs (it leads, PP8 to come); C=4's round 2
    # failed (kept) and round 3 replaced it, so C=4 has 4 valid rounds of 5
    assert [g for g in got if g[0] == PP4 and g[1] == "2"] == [
        (PP4, "2", str(r), "6") for r in range(1, 5)]
    assert [g for g in got if g[0] == PP4 and g[1] == "4"] == [
        (PP4, "4", "1", "6"), (PP4, "4", "2", "5"), (PP4, "4", "3", "6"), (PP4, "4", "4", "6"),
        (PP4, "4", "5", "6")]
    # PP8: round 1 failed, round 2 counted, round 3 replaced round 1 and failed too: no more
    assert [g for g in got if g[0] == PP8 and g[1] == "2"] == [
        (PP8, "2", "1", "5"), (PP8, "2", "2", "6"), (PP8, "2", "3", "5")]
    log = (run / "progress.log").read_text()
    assert (f"{PP4} C=2: extra round 3 (up to 4): leads after 2 round(s), and 1 point(s) still "
            "to measure will be compared with it") in log
    assert f"{PP4} C=4: round 3 replaces round 2, which missed N/N" in log
    assert f"{PP8} C=2: round 3 replaces round 1, which missed N/N" in log

    assert json.loads((run / "metadata" / "run.json").read_text())["compare"]["sequential"]
    answers = json.loads((run / "answers.json").read_text())["answers"]
    layout = next(a for a in answers if a["kind"] == "layout")
    assert any("sequential over 3 looks (2..4 rounds)" in r for r in layout["reasons"])
    assert layout["answer"] == PP4 and [e["point"] for e in layout["excluded"]] == [PP8]
    per_c = layout["per_c"]
    assert per_c["2"] == {"status": "measured", "answer": PP4, "invalid": [PP8]}
    # at C=4 both are valid and compared (on this small workload PP4 is the faster one)
    assert per_c["4"]["invalid"] == [] and per_c["4"]["status"] != "measured", per_c
    # every round names its boot (a digest, not the token): one boot per layout here
    boots = {(r["config_id"], r["boot"]) for r in rows(run / "results.csv")}
    assert len(boots) == 2 and all(b.startswith("boot-") and len(b) == 17 for _, b in boots)
    assert any(r.startswith("Single boot per layout: ") for r in layout["reasons"])
    assert any(r.startswith("Per C (each C at α / 2)") and
               f"{PP8} is invalid at C=2 only" in r for r in layout["reasons"])
