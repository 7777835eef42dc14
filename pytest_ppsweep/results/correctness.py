"""Which layouts compute something wrong: a layout whose greedy outputs disagree with the run's
reference layout (results/outputs.py) or whose task score fails its check (results/accuracy.py)
is not a candidate of any answer, for the same reason a failed boot is not: its numbers measure
a server that does not do the job. :func:`failures` gives each such layout one failure text; the
verdicts (results/verdict.judge) add it to every point of the layout, so every answer excludes
it with that reason and every count shows it INVALID.

Only layouts with an ``outputs/<layout>.json`` (or ``accuracy/<layout>.json``) are judged: a
sweep that turns the probe off, or a layout that never booted, has nothing to check here. The
run's own reference layout is what the others are compared with (a gate's reference run is
judged by the gate: gate/comparison.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pytest_ppsweep.folder.runfolder import ACCURACY_DIR, OUTPUTS_DIR
from pytest_ppsweep.results.accuracy import RunAccuracy
from pytest_ppsweep.results.outputs import outputs_file, outputs_problems, reference_layout

__all__ = ["ACCURACY_FAILURE", "OUTPUTS_FAILURE", "PREFIXES", "failures", "first_problem"]

# A verdict's failure that says a layout computes wrong answers starts with one of these
# (results/questions.py excludes the layout once with it, as it does a failed boot).
OUTPUTS_FAILURE = "wrong outputs"
ACCURACY_FAILURE = "accuracy check failed"
PREFIXES = (OUTPUTS_FAILURE, ACCURACY_FAILURE)


def first_problem(config_id: str, problems: list[str]) -> str:
    """The first of a check's problem lines without its leading ``<layout>: `` and with how
    many more there are."""
    text = problems[0].removeprefix(f"{config_id}: ")
    more = len(problems) - 1
    return text + (f" (and {more} more)" if more else "")


def failures(run_dir: Path, config_ids: Iterable[str],
             scores: RunAccuracy | None = None) -> dict[str, str]:
    """Per layout of ``config_ids`` whose outputs or task score fail, the failure that excludes
    it (``wrong outputs (vs <reference>, …): …`` / ``accuracy check failed: …``);
    ``scores``: the run's task scores when read already."""
    run_dir = Path(run_dir)
    has_outputs = (run_dir / OUTPUTS_DIR).is_dir()
    has_scores = (run_dir / ACCURACY_DIR).is_dir()
    if not has_outputs and not has_scores:
        return {}
    out: dict[str, str] = {}
    read = scores
    ref = reference_layout(run_dir) if has_outputs else None
    for cid in config_ids:
        if has_outputs and outputs_file(run_dir, cid).is_file():
            found = outputs_problems(run_dir, cid)
            if found:
                against = f" (vs {ref}, this run's reference layout)" if ref else ""
                out[cid] = f"{OUTPUTS_FAILURE}{against}: {first_problem(cid, found)}"
                continue
        if has_scores:
            read = RunAccuracy.read(run_dir) if read is None else read
            if read.get(cid) is not None:
                found = read.problems(cid, run_dir)
                if found:
                    out[cid] = f"{ACCURACY_FAILURE}: {first_problem(cid, found)}"
    return out
