"""A layout that computes wrong answers is excluded from every answer, with the reason, as a
failed boot is (results/correctness.py): its greedy outputs disagree with the run's reference
layout, or its task score fails. The stored seeds' run decides PP8; once PP8's outputs
disagree (or its accuracy drops), it is no candidate, every point of it is INVALID with the
reason, and the answer is another layout."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.paths import REPO

from pytest_ppsweep.results.accuracy import LayoutAccuracy
from pytest_ppsweep.results.answers import DECIDED
from pytest_ppsweep.results.correctness import failures
from pytest_ppsweep.results.outputs import LayoutOutputs, PromptOutput
from pytest_ppsweep.results.pipeline import analyse

STORED = REPO / "tests" / "data" / "answers" / "ppsweep"
LAYOUTS = ("pp1-tp32-ep4", "pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2")
PP8 = "pp8-tp4-ep4"


def _outputs(cid: str, ids: tuple[int, ...]) -> LayoutOutputs:
    top = tuple(((t, -0.1), (t + 100, -3.0)) for t in ids)
    return LayoutOutputs(cid, (PromptOutput("The capital of France is", ids,
                                            tuple(-0.1 for _ in ids), top),), 0.1, 0.2)


def _score(cid: str, correct: int) -> LayoutAccuracy:
    return LayoutAccuracy(cid, "builtin", 60, correct, 0, 0.05, 0.2, 0.03, 60, 0.0, "digest",
                          "tasks.jsonl")


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(STORED, run)
    return run


def test_the_stored_run_decides_pp8_with_sound_outputs(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    for cid in LAYOUTS:
        _outputs(cid, (1, 2, 3)).write(run)
    assert failures(run, LAYOUTS) == {}
    (layout,) = analyse(run)[3]
    assert (layout.status, layout.answer, layout.excluded) == (DECIDED, PP8, ())


def test_a_layout_whose_outputs_disagree_is_excluded_from_the_answer(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    for cid in LAYOUTS:
        _outputs(cid, (7, 8, 9) if cid == PP8 else (1, 2, 3)).write(run)
    _, _, verdicts, answers = analyse(run)
    (layout,) = answers
    assert layout.answer != PP8 and PP8 not in layout.ranking
    why = dict(layout.excluded)[PP8]
    assert why.startswith("wrong outputs (vs pp1-tp32-ep4, this run's reference layout): "
                          "prompt 0 'The capital of France is': first differing position 0: "
                          "token 7"), why
    mine = [v for v in verdicts if v.config_id == PP8]
    assert mine and all(not v.valid and any(f.startswith(why.rstrip("…")) for f in v.failures)
                        for v in mine)
    sound = [f for v in verdicts if v.config_id != PP8 for f in v.failures]
    assert not any(f.startswith("wrong outputs") for f in sound), sound


def test_a_layout_whose_accuracy_fails_is_excluded_from_the_answer(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    for cid in LAYOUTS:
        _score(cid, 5 if cid == PP8 else 55).write(run)
    (layout,) = analyse(run)[3]
    assert layout.answer != PP8 and PP8 not in layout.ranking
    why = dict(layout.excluded)[PP8]
    assert why.startswith("accuracy check failed: accuracy 8.3 % "), why


def test_answers_json_keeps_a_p_value_in_full() -> None:
    """A comparison decided at p = 3e-9 says so in answers.json: not 0.0 (rounded to 4
    places), which claims a certainty no test gives."""
    from pytest_ppsweep.results.answers import Evidence

    ev = Evidence("pp8", "pp4", 8, "input_tps", 26.8234567, 0.5, "better", p_value=3.2e-9)
    body = ev.as_dict()
    assert body["p_value"] == 3.2e-9 and body["delta_pct"] == 26.8235
    assert Evidence("a", "b", 8, "input_tps", 1.0, 0.5, "better").as_dict()["p_value"] is None
