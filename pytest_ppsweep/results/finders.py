"""Every question finder of a run, in the order their answers are shown. A new kind of
question (e.g. the SLO question) adds its finder to :func:`finders` with one line."""

from __future__ import annotations

from pytest_ppsweep.results import questions, sloanswer
from pytest_ppsweep.results.answers import _REGISTERED, Answer, AnswerInput, Finder


def finders() -> list[Finder]:
    """The built-in finders, then those added with ``answers.register``."""
    builtin: list[Finder] = [
        sloanswer.slo_answers,  # a sweep that states an SLO asks that first: its answer leads
        questions.layout_answers,
        questions.joint_answers,
        questions.axis_answers,
    ]
    return builtin + [f for f in _REGISTERED if f not in builtin]


def answer_all(given: AnswerInput) -> list[Answer]:
    """Every question's answer, finder by finder."""
    out: list[Answer] = []
    for finder in finders():
        out.extend(finder(given))
    return out
