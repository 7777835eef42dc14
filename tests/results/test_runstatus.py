"""results/runstatus.py: which points count as measured, the resume command, and answers
qualified by an interrupted or partial run (never ``decided`` about the whole question)."""

from __future__ import annotations

from dataclasses import replace

from pytest_ppsweep.results.answers import DECIDED, INCONCLUSIVE, Answer
from pytest_ppsweep.results.runstatus import (
    COMPLETE,
    INTERRUPTED,
    PARTIAL,
    RunStatus,
    measured_points,
    qualify,
    resume_command,
)

IDS = ["pp1", "pp2", "pp4", "pp8", "pp16"]


def _answer(status: str = DECIDED, answer: str | None = "pp8", **extra: str) -> Answer:
    return Answer("layout", "default", "which layout", ("input_tps",), status, answer=answer,
                  fallback="pp4" if answer else None, ranking=("pp8", "pp4"), extra=dict(extra))


def test_a_point_is_measured_at_every_c_of_its_selection() -> None:
    wanted = {"pp1": [8, 16], "pp2": [8, 16], "pp4": [], "pp8": [8]}
    rounds = [("pp1", 8), ("pp1", 16), ("pp2", 8), ("pp4", 8), ("pp8", 8), ("pp16", 8)]
    measured, missing = measured_points(IDS, wanted, rounds)
    # pp2 lacks C=16; pp4 names no C (any round); pp16 was deselected
    assert (measured, missing) == (["pp1", "pp4", "pp8"], ["pp2", "pp16"])
    assert measured_points(IDS, {cid: [8] for cid in IDS}, []) == ([], IDS)


def test_the_resume_command_replaces_the_run_id_options() -> None:
    args = ["test_matrix", "-k", "pp8 or pp4", "--ppsweep-run-id", "mine", "--ppsweep-resume=x"]
    assert resume_command(args, "mine") == (
        "pytest test_matrix -k 'pp8 or pp4' --ppsweep-resume mine")


def test_a_partial_runs_resume_drops_the_selection_to_measure_the_rest() -> None:
    args = ["test_matrix", "-k", "pp8", "-mslow", "--ppsweep-config", "pp4,pp8",
            "--ppsweep-concurrency=16", "-q", "-p", "no:cacheprovider", "--ppsweep-run-id", "r"]
    assert resume_command(args, "r", every_layout=True) == (
        "pytest test_matrix -q -p no:cacheprovider --ppsweep-resume r")
    # an interrupted run's keeps them: it finishes what was asked
    assert resume_command(args, "r").startswith("pytest test_matrix -k pp8 -mslow")


def test_an_interrupted_run_decides_nothing() -> None:
    status = RunStatus(INTERRUPTED, ("pp1",), ("pp2", "pp4", "pp8", "pp16"), "pp2", "pytest x")
    (a,) = qualify([_answer()], status)
    assert a.status == "interrupted" and a.answer is None and a.fallback is None
    assert a.extra["text"] == "interrupted after 1 of 5 layouts: pp1 measured; nothing compared."
    assert a.extra["status_before"] == DECIDED and a.extra["leader"] == "pp8"
    (b,) = qualify([_answer(INCONCLUSIVE, None)], status)  # every answer says it
    assert b.status == "interrupted"
    many = RunStatus(INTERRUPTED, ("pp1", "pp2", "pp8"), ("pp4", "pp16"), None, "pytest x")
    (c,) = qualify([_answer(text="own words")], many)
    assert c.extra["text"] == ("interrupted after 3 of 5 layouts: pp8 leads among pp1, pp2, pp8; "
                               "pp4 and pp16 not run. own words")
    assert status.lines() == [
        "run status: INTERRUPTED during pp2, after 1 of 5 layouts; not measured: pp2, pp4, pp8, "
        "pp16", "resume: pytest x"]


def test_a_partial_run_names_what_is_missing() -> None:
    status = RunStatus(PARTIAL, ("pp1", "pp4", "pp8"), ("pp2", "pp16"), None, "pytest y")
    decided, unsure = qualify([_answer(), _answer(INCONCLUSIVE, None)], status)
    assert decided.status == "partial" and decided.answer is None
    assert decided.extra["text"] == "decided among 3 of 5 layouts: pp8; pp2 and pp16 not run."
    assert unsure.status == INCONCLUSIVE  # it claims nothing about the whole question
    (one,) = qualify([_answer()], RunStatus(PARTIAL, ("pp8",), ("pp1", "pp2", "pp4", "pp16")))
    assert one.extra["text"] == "1 of 5 layouts: pp8 measured; nothing compared."


def test_a_complete_run_keeps_its_answers() -> None:
    answers = [_answer()]
    status = RunStatus(COMPLETE, tuple(IDS), ())
    assert qualify(answers, status) == answers
    assert status.lines() == ["run status: COMPLETE, 5 of 5 layouts measured"]
    assert status.detail() == {"measured": IDS, "missing": [], "interrupted_at": None,
                               "resume": None}


def _scoped(status: str = DECIDED, answer: str | None = "pp8", points: tuple[str, ...] = (),
            excluded: tuple[tuple[str, str], ...] = (), kind: str = "axis") -> Answer:
    return Answer(kind, "default", "which a2a", ("input_tps",), status, answer=answer,
                  ranking=("pp8", "pp8-deepep"), excluded=excluded,
                  extra={"points": list(points)})


def test_a_partial_runs_answer_counts_the_points_of_its_own_question() -> None:
    # pp16 and pp16-deepep were not run: the question about pp8's a2a lost none of its points
    status = RunStatus(PARTIAL, ("pp8", "pp8-deepep", "pp4"), ("pp4-deepep", "pp16",
                                                               "pp16-deepep"))
    whole = _scoped(points=("pp8", "pp8-deepep"))
    assert qualify([whole], status) == [whole]
    # pp4's: its deepep point failed, as the sweep expected: evidence, not a gap
    oom = ("pp4-deepep", "OOM, as expected: seeds §10")
    expected = _scoped(answer="pp4", points=("pp4", "pp4-deepep"), excluded=(oom,))
    assert qualify([expected], status) == [expected]
    # a failure nobody expected and a point never run are named, each for what it is
    lost = _scoped(answer="pp4", points=("pp8", "pp4", "pp4-deepep", "pp16"),
                   excluded=(("pp4-deepep", "boot failed: NCCL error"),))
    (a,) = qualify([lost], status)
    assert a.status == "partial" and a.answer is None
    assert a.extra["text"] == "decided among 2 of 4 points: pp4; pp16 not run; pp4-deepep failed."
    both = _scoped(answer="pp4", points=("pp8", "pp4", "pp4-deepep", "pp16"), excluded=(oom,),
                   kind="layout")
    (b,) = qualify([both], status)
    assert b.extra["text"] == ("decided among 2 of 4 layouts: pp4; pp16 not run; pp4-deepep "
                               "OOM, as expected.")


def test_an_undecided_answer_of_a_partial_run_names_the_points_not_run() -> None:
    status = RunStatus(PARTIAL, ("pp4", "pp8", "pp16"), ("pp1", "pp2"))
    unsure = _scoped(INCONCLUSIVE, None, points=("pp1", "pp2", "pp4", "pp8", "pp16"),
                     kind="layout")
    (a,) = qualify([unsure], status)
    assert a.status == INCONCLUSIVE  # it claims nothing about the whole question...
    assert a.caveats == ("among 3 of 5 layouts only: pp1 and pp2 not run.",)  # ...and says so
    # a point that failed is named among the excluded already, with its reason: not again
    failed = replace(unsure, excluded=(("pp1", "boot failed"), ("pp2", "boot failed")))
    assert qualify([failed], status) == [failed]


def test_an_interrupted_runs_answer_lists_the_points_of_its_question() -> None:
    status = RunStatus(INTERRUPTED, ("pp8", "pp8-deepep", "pp4"), ("pp4-deepep",), "pp4-deepep")
    (a,) = qualify([_scoped(answer="pp4", points=("pp4", "pp4-deepep"))], status)
    assert a.extra["text"] == "interrupted after 3 of 4 layouts: pp4 measured; nothing compared."


def test_a_partial_run_whose_missing_points_failed_as_expected_has_nothing_to_resume() -> None:
    """A resume would boot the expected failures again only to fail as expected: the status
    says there is nothing to resume instead of printing the command; a point that is missing
    for another cause keeps it."""
    only_expected = RunStatus(PARTIAL, ("pp8", "pp4"), ("pp4-deepep",), None, "pytest z",
                              expected=("pp4-deepep",))
    lines = only_expected.lines()
    assert "pp4-deepep (failed as expected)" in lines[0]
    assert not any(line.startswith("resume: ") for line in lines)
    assert "(nothing to resume: every point not measured failed as the sweep expects)" in lines
    also_missing = RunStatus(PARTIAL, ("pp8", "pp4"), ("pp4-deepep", "pp16"), None, "pytest z",
                             expected=("pp4-deepep",))
    assert "resume: pytest z" in also_missing.lines()
