"""The results pipeline, once: a run folder read (results.csv, configs.csv, run.json), aggregated,
judged and answered (results/finders.py), then summary.csv, comparisons.csv and answers.json
written. The run's close (run/close.py) and the report's rebuild (report/html.py, report/cli.py)
call it; the views render what it returns (report/summary.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pytest_ppsweep.folder.runfolder import RunFolder
from pytest_ppsweep.results import correctness
from pytest_ppsweep.results.accuracy import RunAccuracy
from pytest_ppsweep.results.aggregate import (
    RunData,
    RunFolderError,
    Summary,
    energy_points,
    load_run,
    round_counts,
    summarize_run,
    write_summary,
)
from pytest_ppsweep.results.answers import Answer, expected_failures, write_answers
from pytest_ppsweep.results.finders import answer_all
from pytest_ppsweep.results.livestatus import folder_status, rounds_of
from pytest_ppsweep.results.questions import answer_input
from pytest_ppsweep.results.runstatus import RunStatus, qualify
from pytest_ppsweep.results.verdict import Verdict, judge

__all__ = ["Analysis", "analyse", "run_pipeline", "save"]

Analysis = tuple[RunData, Summary, tuple[Verdict, ...], list[Answer]]
"""A run folder aggregated and judged: its data, summary, verdicts and answers."""


def analyse(run_dir: Path, data: RunData | None = None, status: RunStatus | None = None
            ) -> Analysis:
    """Load a run folder (unless ``data`` is what was read of it already), aggregate it, judge
    each point and answer its questions (results/finders.py), the answers qualified by the
    run's ``status`` (else the status its folder says now, results/livestatus.py): a running,
    interrupted or partial run never says decided about the whole question. The status is
    the analysed data's ``meta.status``; the folder's other files (the SLO search's, comm,
    planner) are read here, once, into its ``files``: the finders and the views read them
    there (each of the folder's files is read once per analysis)."""
    data = load_run(run_dir) if data is None else data
    if status is None:
        frame = data.results
        rounds = rounds_of({"config_id": c, "concurrency": n}
                           for c, n in zip(frame["config_id"], frame["concurrency"], strict=True))
        status = folder_status(data.run_dir, data.run_json, rounds=rounds)
    data = replace(data, meta=replace(data.meta, status=status),
                   files=RunFolder(data.run_dir).files(data.run_json, data.result_rows))
    summary = summarize_run(data)
    # a layout that computes wrong answers is excluded everywhere, as a failed boot is
    counts = round_counts(data.results)  # the verdicts' and the answers' N/N rule, once
    wrong = correctness.failures(data.run_dir, summary.order,
                                 RunAccuracy.of_files(data.files) if data.files else None)
    verdicts = judge(data, summary, counts=counts, wrong=wrong)
    answers = answer_all(answer_input(data, summary, verdicts, counts=counts))
    if status is None:
        return data, summary, verdicts, answers
    expected = expected_failures(answers)
    if any(c in expected for c in status.missing):  # the status line says which, too
        status = replace(status, expected=tuple(c for c in status.missing if c in expected))
        data = replace(data, meta=replace(data.meta, status=status))
    return data, summary, verdicts, qualify(answers, status)


def save(data: RunData, summary: Summary, answers: Sequence[Answer]) -> None:
    """summary.csv (with comparisons.csv) and answers.json of the run folder."""
    write_summary(data.run_dir, summary)
    write_answers(data.run_dir, data.meta.run_id, answers, energy_points(summary))


def run_pipeline(run_dir: Path, data: RunData | None = None, status: RunStatus | None = None
                 ) -> tuple[Analysis | None, str]:
    """The run folder analysed (``data``: what was read of it already) and its summary.csv and
    answers.json written, an interrupted or partial run's answers qualified by its ``status``
    (results/runstatus.py); without rounds to aggregate, None and the note that says why."""
    try:
        analysis = analyse(run_dir, data, status)
    except RunFolderError as exc:
        return None, f"no summary: {exc}"
    save(analysis[0], analysis[1], analysis[3])
    return analysis, ""
