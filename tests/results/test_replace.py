"""A failed round is evidence, not a silent exclusion (issue 37 point 5): one replacement round
while the layout is up, a second failure excludes the point, and a point invalid at only some
Cs is answered per C."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.runs import SEED_LAYOUTS, config_row, rounds, seed_points, write_run

from pytest_ppsweep.results.aggregate import load_run, summarize_run
from pytest_ppsweep.results.answers import DECIDED
from pytest_ppsweep.results.pipeline import analyse
from pytest_ppsweep.results.replace import missed_nn, replaced, replacement_for
from pytest_ppsweep.results.verdict import judge

PP4, PP8 = "pp4-tp8-ep4", "pp8-tp4-ep4"


def test_replacement_for_one_failed_round_only() -> None:
    assert replacement_for([], 4, 3) is None
    assert replacement_for([2], 4, 3) == "round 2, which missed N/N"
    assert replacement_for([2], 3, 3) is None  # a planned round is not a replacement
    assert replacement_for([2], 5, 3) is None  # one replacement, right after the planned
    assert replacement_for([5], 6, 3) == "round 5, which missed N/N"  # an extra round failed
    assert replacement_for([2, 4], 5, 3) is None  # a second failure: no more replacement


def test_which_rounds_are_nn_misses() -> None:
    row = rounds(seed_points([PP8])[0])[0]
    assert not missed_nn(row)
    assert missed_nn({**row, "completed": 39, "failed": 1})
    assert not missed_nn({**row, "input_tokens": 1})  # another workload ran: not replaced
    assert not missed_nn({**row, "completed": 39, "input_tokens": 1})
    assert replaced(1, 0, 3, 3) and not replaced(2, 0, 3, 3) and not replaced(1, 1, 3, 3)
    assert not replaced(1, 0, 2, 3)  # the replacement did not run (or failed)


def _pp8_rows(c16: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pts = {p.concurrency: p for p in seed_points([PP8, PP4]) if p.config_id == PP8}
    return rounds(pts[8]) + c16


def _c16(failed: tuple[int, ...], total: int = 4) -> list[dict[str, Any]]:
    point = next(p for p in seed_points([PP8]) if p.concurrency == 16)
    rows = rounds(point, repeats=total)
    for r in rows:
        if r["repeat"] in failed:
            r.update(completed=39, failed=1)
    return rows


def _run(tmp_path: Path, c16: list[dict[str, Any]]) -> Path:
    rows = _pp8_rows(c16) + [r for p in seed_points([PP4]) for r in rounds(p)]
    configs = [config_row(cid, *SEED_LAYOUTS[cid][:3], i, SEED_LAYOUTS[cid][3])
               for i, cid in enumerate((PP4, PP8))]
    return write_run(tmp_path / "run", rows, configs, baseline=PP4, order=[PP4, PP8],
                     workload={"concurrency": [8, 16], "num_requests": 40, "repeats": 3})


def test_one_replaced_round_is_a_warning_of_a_valid_point(tmp_path: Path) -> None:
    data = load_run(_run(tmp_path, _c16((2,))))
    v = {(x.config_id, x.concurrency): x for x in judge(data, summarize_run(data))}
    assert v[(PP8, 16)].valid
    assert v[(PP8, 16)].warnings == ("39/40 completed in repeat 2 (replaced)",
                                     "1 failed request(s) in repeat 2 (replaced)")


def test_a_second_failure_excludes_the_point_at_that_c_only(tmp_path: Path) -> None:
    run = _run(tmp_path, _c16((2, 4)))
    _, _, verdicts, answers = analyse(run)
    v = {(x.config_id, x.concurrency): x for x in verdicts}
    assert not v[(PP8, 16)].valid and v[(PP8, 8)].valid
    assert v[(PP8, 16)].failures[0] == "39/40 completed in repeat 2"
    layout = next(a for a in answers if a.kind == "layout")
    # overall: PP8 is excluded (invalid at C=16), the faster-excluded caveat says so
    assert layout.status == "measured" and layout.answer == PP4
    assert layout.caveats and "pp8-tp4-ep4 is 24 % faster" in layout.caveats[0]
    # per C: PP8 answers C=8, where it is valid; PP4 is the only valid point at C=16
    per_c = layout.extra["per_c"]
    assert per_c["8"] == {"status": DECIDED, "answer": PP8, "invalid": []}
    assert per_c["16"] == {"status": "measured", "answer": PP4, "invalid": [PP8]}
    text = next(r for r in layout.reasons if r.startswith("Per C"))
    assert text == (f"Per C (each C at α / 2): {PP8} at C=8; measured at C=16. {PP8} is invalid "
                    "at C=16 only: it is answered at the other Cs.")


def test_no_per_c_answer_when_every_c_agrees(tmp_path: Path) -> None:
    run = _run(tmp_path, _c16((2,)))
    layout = next(a for a in analyse(run)[3] if a.kind == "layout")
    assert layout.status == DECIDED and layout.answer == PP8
    assert "per_c" not in layout.extra
    # the rounds each decision read: PP8's replaced round leaves 3 valid at C=16
    assert layout.extra["rounds"] == {PP4: {"8": 3, "16": 3}, PP8: {"8": 3, "16": 3}}
    assert f"Rounds spent (valid, per C 8/16): {PP4} 3/3; {PP8} 3/3." in layout.reasons
