"""The results pipeline, once: a run folder read (results.csv, configs.csv, run.json), aggregated,
judged and answered (results/finders.py), then summary.csv, comparisons.csv and answers.json
written. The run's close (run/close.py) and the report's rebuild (report/html.py, report/cli.py)
call it; the views render what it returns (report/summary.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_ppsweep.results.aggregate import (
    RunData,
    RunFolderError,
    Summary,
    load_run,
    summarize_run,
    write_summary,
)
from pytest_ppsweep.results.answers import Answer, write_answers
from pytest_ppsweep.results.finders import answer_all
from pytest_ppsweep.results.questions import answer_input
from pytest_ppsweep.results.runstatus import RunStatus, qualify
from pytest_ppsweep.results.verdict import Verdict, judge

__all__ = ["Analysis", "analyse", "run_pipeline", "save"]

Analysis = tuple[RunData, Summary, tuple[Verdict, ...], list[Answer]]
"""A run folder aggregated and judged: its data, summary, verdicts and answers."""


def analyse(run_dir: Path, data: RunData | None = None) -> Analysis:
    """Load a run folder (unless ``data`` is what was read of it already), aggregate it, judge
    each point and answer its questions (results/finders.py)."""
    data = load_run(run_dir) if data is None else data
    summary = summarize_run(data)
    verdicts = judge(data, summary)
    return data, summary, verdicts, answer_all(answer_input(data, summary, verdicts))


def save(data: RunData, summary: Summary, answers: Sequence[Answer]) -> None:
    """summary.csv (with comparisons.csv) and answers.json of the run folder."""
    write_summary(data.run_dir, summary)
    write_answers(data.run_dir, data.meta.run_id, answers)


def run_pipeline(run_dir: Path, data: RunData | None = None, status: RunStatus | None = None
                 ) -> tuple[Analysis | None, str]:
    """The run folder analysed (``data``: what was read of it already) and its summary.csv and
    answers.json written, an interrupted or partial run's answers qualified by its ``status``
    (results/runstatus.py); without rounds to aggregate, None and the note that says why."""
    try:
        analysis = analyse(run_dir, data)
    except RunFolderError as exc:
        return None, f"no summary: {exc}"
    if status is not None:
        run, summary, verdicts, answers = analysis
        analysis = (run, summary, verdicts, qualify(answers, status))
    save(analysis[0], analysis[1], analysis[3])
    return analysis, ""
