"""results/accuracy.py: how an answer is scored (lm-eval's regex filter and exact match), the
few-shot prompt, the file of a layout's score and the run's pooled score."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_ppsweep.matrix.accuracyspec import AccuracySpec, Task
from pytest_ppsweep.results import accuracy as acc
from pytest_ppsweep.stats.accuracytest import plan


def _spec(**kw: object) -> AccuracySpec:
    return AccuracySpec(tasks_path=Path("t.jsonl"), tasks=(Task("a", "b"),), **kw)  # type: ignore[arg-type]


def test_exact_match_cuts_at_stop_and_strips() -> None:
    spec = _spec()
    assert acc.score_answer(spec, " 42\nmore", "42") == ("42", True)
    assert acc.score_answer(spec, " 42 \n", " 42") == ("42", True)
    assert acc.score_answer(spec, "420", "42") == ("420", False)
    assert acc.score_answer(_spec(stop=("Q:", "\n")), "x Q: y", "x") == ("x", True)


def test_regex_takes_the_first_match_or_its_first_group_else_invalid() -> None:
    spec = _spec(metric="regex", regex=r"answer is (\-?\d+)", stop=("\n\n",))
    assert acc.score_answer(spec, "so the answer is 12. answer is 13", "12") == ("12", True)
    assert acc.score_answer(spec, "no idea", "12") == (acc.FALLBACK, False)
    whole = _spec(metric="regex", regex=r"\d+")
    assert acc.score_answer(whole, "x 7 y 8", "7") == ("7", True)
    groups = _spec(metric="regex", regex=r"(A)|(B)")
    assert acc.extract("B", "regex", groups.regex) == "B"  # the first non-empty group


def test_the_few_shot_prompt_is_lm_evals() -> None:
    shots = (Task("Q: 1+1", "2"), Task("Q: 2+2", "4"))
    assert acc.task_prompt(shots, Task("Q: 3+3", "6")) == "Q: 1+1 2\n\nQ: 2+2 4\n\nQ: 3+3"
    assert acc.task_prompt((), Task("Q", "x")) == "Q"


def test_a_layouts_file_and_the_runs_pooled_score(tmp_path: Path) -> None:
    spec = _spec()
    p = plan(0.03, 0.05, 0.2, 10)
    answers = [acc.Answer(i, "c", "c", i < 7, "" if i else "HTTP 500") for i in range(10)]
    a = acc.layout_accuracy(spec, p, "pp1", answers, boot_of="pp1")
    a.write(tmp_path)
    back = acc.read_accuracy(tmp_path, "pp1")
    assert back == a and (a.n, a.correct, a.errors, a.first_error) == (10, 7, 1, "HTTP 500")
    stored = json.loads((tmp_path / "accuracy" / "pp1.json").read_text())
    assert stored["score"] == 0.7 and stored["interval"] == "wilson 95 %"
    assert 0.39 < stored["low"] < 0.7 < stored["high"] < 0.92
    acc.layout_accuracy(spec, p, "pp2", answers[:5]).write(tmp_path)  # 5 asked, 5 right
    assert acc.run_accuracy(tmp_path) == (7 + 5) / 15
    assert acc.run_accuracy(tmp_path / "none") is None
    problems = acc.accuracy_problems(tmp_path, "pp1")
    assert problems[0] == ("pp1: 1 of 10 questions could not be asked (counted wrong); the "
                           "first: HTTP 500")
    assert acc.accuracy_problems(tmp_path, "pp9") == [
        f"pp9: no accuracy recorded ({tmp_path / 'accuracy' / 'pp9.json'})"]


def test_min_score_and_another_task_file(tmp_path: Path) -> None:
    spec = _spec(min_score=0.8)
    p = plan(0.03, 0.05, 0.2, 10)
    acc.layout_accuracy(spec, p, "pp1", [acc.Answer(i, "", "", True) for i in range(10)]).write(
        tmp_path)
    acc.layout_accuracy(spec, p, "pp2", [acc.Answer(i, "", "", i < 7) for i in range(10)]).write(
        tmp_path)
    assert acc.accuracy_problems(tmp_path, "pp2")[0] == (
        "pp2: accuracy 70.0 % [39.7, 89.2] (7/10) of n = 10 is below min_score 80.0 %")
    other = tmp_path / "other"
    acc.layout_accuracy(_spec(few_shot=0, metric="regex", regex="x"), p, "pp2",
                        [acc.Answer(0, "", "", True)]).write(other)
    assert any("not comparable with pp2 of the baseline run other: another task file" in line
               for line in acc.accuracy_problems(tmp_path, "pp2", other))


def test_a_worse_reference_layout_fails_against_the_others_pooled(tmp_path: Path) -> None:
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "run.json").write_text(json.dumps(
        {"baseline": "pp8", "order": ["pp8", "pp1", "pp2"]}))
    spec, p = _spec(), plan(0.03, 0.05, 0.2, 20)
    for cid, right in (("pp8", 6), ("pp1", 19), ("pp2", 18)):
        acc.layout_accuracy(spec, p, cid, [acc.Answer(i, "", "", i < right)
                                           for i in range(20)]).write(tmp_path)
    assert acc.accuracy_problems(tmp_path, "pp1") == []  # better than the reference: passes
    (line,) = acc.accuracy_problems(tmp_path, "pp8")
    assert line.startswith("pp8: accuracy 30.0 % [14.5, 51.9] (6/20) of n = 20 is below the "
                           "threshold 70.0 % against the run's other layouts, pooled (this is "
                           "the reference layout; parallelism must not change accuracy)'s "
                           "92.5 % [80.1, 97.4] (37/40) of n = 40"), line
