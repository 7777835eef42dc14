"""A layout's task score: ``accuracy/<layout>.json``, how an answer is scored, the
prompt a question is asked with, and the rule of ``test_accuracy``.

**Scoring** (:func:`score_answer`, both backends alike): the completion is cut at the first
``stop`` string; ``metric = "exact"``: it equals the answer, both stripped; ``metric =
"regex"``: the regex's first match in it (its first non-empty group when it has groups),
stripped, equals the answer stripped. This is lm-eval's ``regex`` filter (``findall``, the
first match, ``strip``) followed by its ``exact_match``, so the builtin backend and lm-eval
score one completion the same.

**The prompt** (:func:`task_prompt`): each shot's prompt, a space and its answer, the shots and
the question separated by a blank line: lm-eval's ``target_delimiter`` " " and
``fewshot_delimiter`` "\\n\\n" with its ``first_n`` sampler over the shots.

**The rule** (:func:`accuracy_problems`), each at the ``[accuracy]`` α with the threshold of
stats/accuracytest.py:

* a question that could not be asked (an HTTP error): the layout fails, naming it;
* a score below ``min_score`` fails;
* parallelism must not change accuracy: a layout significantly worse than the run's reference
  layout (the baseline layout, else the first in sweep order with a score) fails, and the
  reference layout itself fails when it is significantly worse than the others pooled (seen
  once they have run: the report, a resumed run);
* under the gate (``--ppsweep-compare``), a score below the threshold against the reference
  run's score of the same layout (else of its reference layout) fails.

Each message names both scores with their Wilson intervals, both n and the threshold.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.folder.runfolder import (
    ACCURACY_DIR,
    FolderFiles,
    RunFolder,
    RunKey,
    accuracy_answers_jsonl,
    accuracy_json,
)
from pytest_ppsweep.matrix.accuracyspec import AccuracySpec, Task
from pytest_ppsweep.results.outputs import baseline_and_order
from pytest_ppsweep.stats.accuracytest import SIGMA, Plan, threshold
from pytest_ppsweep.stats.binomial import wilson

__all__ = ["FALLBACK", "FORMAT", "Answer", "LayoutAccuracy", "RunAccuracy", "accuracy_problems",
           "all_accuracy",
           "append_answer", "extract", "read_accuracy", "reference_layout", "run_accuracy",
           "score_answer", "task_digest", "task_prompt"]

FORMAT = "ppsweep-accuracy/1"
FALLBACK = "[invalid]"  # lm-eval's regex filter's value when nothing matches
TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"


def task_prompt(shots: Sequence[Task], question: Task) -> str:
    """The text a question is asked with (see the module docstring)."""
    parts = [f"{s.prompt}{TARGET_DELIMITER}{s.answer}" for s in shots]
    return FEWSHOT_DELIMITER.join([*parts, question.prompt])


def cut(completion: str, stop: Sequence[str]) -> str:
    """The completion up to its first stop string."""
    end = len(completion)
    for s in stop:
        i = completion.find(s)
        if i >= 0:
            end = min(end, i)
    return completion[:end]


def extract(completion: str, metric: str, regex: str) -> str:
    """What of a (cut) completion is compared with the answer."""
    if metric != "regex":
        return completion.strip()
    found = re.findall(regex, completion)
    if not found:
        return FALLBACK
    first = found[0]
    if isinstance(first, tuple):
        first = next((g for g in first if g), FALLBACK)
    return str(first).strip()


def score_answer(spec: AccuracySpec, completion: str, answer: str) -> tuple[str, bool]:
    """The extracted answer of a completion and whether it is right."""
    got = extract(cut(completion, spec.stop), spec.metric, spec.regex)
    return got, got == answer.strip()


def task_digest(spec: AccuracySpec) -> str:
    """The task file's identity: its questions, shots and metric (two runs compare only on the
    same)."""
    h = hashlib.sha256()
    for t in spec.tasks:
        h.update(json.dumps([t.prompt, t.answer]).encode())
    h.update(json.dumps([spec.few_shot, spec.metric, spec.regex, list(spec.stop)]).encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Answer:
    """One question's answer as scored."""

    index: int  # the question's index among the pool (the file's lines after the shots)
    completion: str
    extracted: str
    correct: bool
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "completion": self.completion, "extracted": self.extracted,
                "correct": self.correct, "error": self.error}


def append_answer(run_dir: Path, config_id: str, answer: Answer) -> None:
    """One answer onto ``accuracy/<layout>.answers.jsonl`` as it is scored."""
    path = Path(run_dir) / accuracy_answers_jsonl(config_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(answer.to_json()) + "\n")


@dataclass(frozen=True)
class LayoutAccuracy:
    """``accuracy/<layout>.json``: a layout's score of the task and how it was asked."""

    config_id: str
    backend: str
    n: int
    correct: int
    errors: int
    alpha: float
    beta: float
    theta: float
    wanted: int
    min_score: float
    tasks: str  # the task file's digest (task_digest)
    task_file: str
    boot_of: str = ""
    first_error: str = ""
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return self.correct / self.n if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.correct, self.n) if self.n else (0.0, 1.0)

    def shown(self) -> str:
        """``85.0 % [74.3, 91.9] (51/60)``."""
        low, high = self.interval
        return (f"{100 * self.score:.1f} % [{100 * low:.1f}, {100 * high:.1f}] "
                f"({self.correct}/{self.n})")

    def to_json(self) -> dict[str, Any]:
        low, high = self.interval
        return {"format": FORMAT, "config_id": self.config_id,
                "boot_of": self.boot_of or self.config_id, "backend": self.backend,
                "n": self.n, "correct": self.correct, "score": self.score, "low": low,
                "high": high, "interval": "wilson 95 %", "errors": self.errors,
                "first_error": self.first_error, "alpha": self.alpha, "beta": self.beta,
                "theta": self.theta, "wanted": self.wanted, "sigma": SIGMA,
                "min_score": self.min_score, "tasks": self.tasks, "task_file": self.task_file,
                "seconds": round(self.seconds, 3), "extra": self.extra}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LayoutAccuracy:
        return cls(
            config_id=str(data["config_id"]), backend=str(data.get("backend", "")),
            n=int(data["n"]), correct=int(data["correct"]), errors=int(data.get("errors", 0)),
            alpha=float(data.get("alpha", 0.05)), beta=float(data.get("beta", 0.2)),
            theta=float(data.get("theta", 0.03)), wanted=int(data.get("wanted", 0)),
            min_score=float(data.get("min_score", 0.0)), tasks=str(data.get("tasks", "")),
            task_file=str(data.get("task_file", "")), boot_of=str(data.get("boot_of", "")),
            first_error=str(data.get("first_error", "")),
            seconds=float(data.get("seconds", 0.0)), extra=dict(data.get("extra") or {}))

    def write(self, run_dir: Path) -> Path:
        path = Path(run_dir) / accuracy_json(self.config_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def layout_accuracy(spec: AccuracySpec, plan: Plan, config_id: str, answers: Sequence[Answer],
                    *, boot_of: str = "", seconds: float = 0.0,
                    extra: dict[str, Any] | None = None) -> LayoutAccuracy:
    """A layout's score from its scored answers (a failed request counts as wrong)."""
    failed = [a for a in answers if a.error]
    return LayoutAccuracy(
        config_id=config_id, backend=spec.backend, n=len(answers),
        correct=sum(1 for a in answers if a.correct), errors=len(failed),
        alpha=spec.alpha, beta=spec.beta, theta=spec.min_drop, wanted=plan.wanted,
        min_score=spec.min_score, tasks=task_digest(spec), task_file=str(spec.tasks_path),
        boot_of=boot_of, first_error=failed[0].error if failed else "", seconds=seconds,
        extra=extra or {})


def _parsed(data: Any) -> LayoutAccuracy | None:
    """A layout's score from its parsed accuracy/<config>.json (None: not a score of ours)."""
    try:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        return LayoutAccuracy.from_json(data)
    except (ValueError, KeyError, TypeError):
        return None


def read_accuracy(run_dir: Path, config_id: str) -> LayoutAccuracy | None:
    """A layout's score, None when the folder has none (or an unreadable file)."""
    try:
        data = json.loads((Path(run_dir) / accuracy_json(config_id)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return _parsed(data)


@dataclass(frozen=True)
class RunAccuracy:
    """Every layout's score of one run, in sweep order (then by name), and the reference
    layout the others are compared with: the baseline layout when it has a score, else the
    first in sweep order that has one. Built from the folder's files as read once
    (:meth:`of`, the report's views) or read here (:meth:`read`)."""

    scores: tuple[LayoutAccuracy, ...]
    reference: str | None

    @classmethod
    def of(cls, parsed: Mapping[str, Any], baseline: str, order: Sequence[str]) -> RunAccuracy:
        """From each layout's accuracy/<config>.json as parsed (``FolderFiles.accuracy``)."""
        rank = {cid: i for i, cid in enumerate(order)}
        found = sorted((a for data in parsed.values() if (a := _parsed(data)) is not None),
                       key=lambda a: (rank.get(a.config_id, len(rank)), a.config_id))
        have = {a.config_id for a in found}
        reference = next((cid for cid in [baseline, *order, *sorted(have)]
                          if cid and cid in have), None)
        return cls(tuple(found), reference)

    @classmethod
    def of_files(cls, files: FolderFiles) -> RunAccuracy:
        """From the files a view was given (run.json's baseline and order among them)."""
        return cls.of(files.accuracy, str(files.meta.get(RunKey.BASELINE) or ""),
                      [str(c) for c in files.meta.get(RunKey.ORDER) or []])

    @classmethod
    def read(cls, run_dir: Path) -> RunAccuracy:
        """Read from a run folder now (each file once)."""
        folder = RunFolder(run_dir)
        if not (folder.dir / ACCURACY_DIR).is_dir():
            return cls((), None)
        baseline, order = baseline_and_order(run_dir)
        return cls.of(folder.accuracy_scores(), baseline, order)

    def get(self, config_id: str) -> LayoutAccuracy | None:
        return next((a for a in self.scores if a.config_id == config_id), None)

    def pooled(self) -> float | None:
        """Right answers over questions asked, every layout pooled (None: no score)."""
        asked = sum(a.n for a in self.scores)
        return sum(a.correct for a in self.scores) / asked if asked else None

    def problems(self, config_id: str, where: Path, compare_ref: Path | None = None
                 ) -> list[str]:
        """Why ``config_id``'s task score fails (the module docstring's rule); empty when it
        passes. ``where``: the run folder, named when the layout has no score."""
        mine = self.get(config_id)
        if mine is None:
            return [f"{config_id}: no accuracy recorded ({Path(where) / accuracy_json(config_id)})"]
        problems = []
        if mine.errors:
            problems.append(f"{config_id}: {mine.errors} of {mine.n} questions could not be "
                            f"asked (counted wrong); the first: {mine.first_error}")
        if mine.score < mine.min_score:
            problems.append(f"{config_id}: accuracy {mine.shown()} of n = {mine.n} is below "
                            f"min_score {100 * mine.min_score:.1f} %")
        ref_id = self.reference
        if ref_id is not None and ref_id != config_id:
            ref = self.get(ref_id)
            line = None if ref is None else compare_line(
                mine, ref, f"{ref_id} (this run's reference layout; parallelism must not change "
                           f"accuracy)")
            if line:
                problems.append(line)
        elif ref_id == config_id:  # the reference itself: against the others, pooled
            others = [a for a in self.scores
                      if a.config_id != config_id and a.tasks == mine.tasks and a.n]
            if others:
                pooled = replace(mine, config_id="+".join(a.config_id for a in others),
                                 n=sum(a.n for a in others),
                                 correct=sum(a.correct for a in others), errors=0)
                line = compare_line(mine, pooled, "the run's other layouts, pooled (this is "
                                                  "the reference layout; parallelism must not "
                                                  "change accuracy)")
                if line:
                    problems.append(line)
        if compare_ref is not None:
            other = Path(compare_ref)
            theirs = RunAccuracy.read(other)  # the baseline run's scores, read once
            gate_id = config_id if theirs.get(config_id) is not None else theirs.reference
            gate = theirs.get(gate_id) if gate_id is not None else None
            if gate is not None:
                line = compare_line(mine, gate, f"{gate_id} of the baseline run {other.name}")
                if line:
                    problems.append(line)
        return problems


def all_accuracy(run_dir: Path) -> list[LayoutAccuracy]:
    """Every layout's score in a run folder, in sweep order (then by name)."""
    return list(RunAccuracy.read(run_dir).scores)


def run_accuracy(run_dir: Path) -> float | None:
    """The run's score: right answers over questions asked, every layout pooled (None: no
    layout has a score). The history's ``accuracy`` column."""
    return RunAccuracy.read(run_dir).pooled()


def reference_layout(run_dir: Path) -> str | None:
    """The layout the others are compared with (:class:`RunAccuracy`)."""
    return RunAccuracy.read(run_dir).reference


def compare_line(mine: LayoutAccuracy, ref: LayoutAccuracy, reference: str) -> str | None:
    """Why ``mine`` fails against ``ref`` (None: it passes): below the one-sided threshold."""
    if mine.tasks != ref.tasks:
        return (f"{mine.config_id}: accuracy not comparable with {reference}: another task "
                f"file or metric ({mine.tasks} vs {ref.tasks})")
    limit = threshold(ref.score, mine.n, ref.n, mine.alpha)
    if mine.score >= limit:
        return None
    return (f"{mine.config_id}: accuracy {mine.shown()} of n = {mine.n} is below the threshold "
            f"{100 * limit:.1f} % against {reference}'s {ref.shown()} of n = {ref.n} "
            f"(one-sided α = {mine.alpha:g}, σ = {SIGMA:g}: significantly worse)")


def accuracy_problems(run_dir: Path, config_id: str, compare_ref: Path | None = None
                      ) -> list[str]:
    """Why ``config_id``'s task score fails (:meth:`RunAccuracy.problems`, the folder read
    once); empty when it passes."""
    return RunAccuracy.read(run_dir).problems(config_id, run_dir, compare_ref)
