"""The ``[accuracy]`` table of a sweep file: a task score per layout.

While a layout is up, the questions of a JSONL task file go to the server's own API greedy, and
each answer is scored; the score, its binomial interval and the gate's threshold are in
``accuracy/<layout>.json`` (results/accuracy.py; the sample size and the threshold come from
stats/accuracytest.py).

Keys (scores and drops in points, 0–100):

- ``tasks`` (required): the JSONL task file, relative to the sweep file; one
  ``{"prompt": …, "answer": …}`` a line.
- ``metric``: ``"exact"`` (default): the completion, cut at the first ``stop`` and stripped,
  equals the answer; ``"regex"``: the ``regex``'s first match in it (its first non-empty group
  when it has groups), stripped, equals the answer.
- ``regex``: the extraction of ``metric = "regex"`` (Python ``re``).
- ``few_shot`` (0): the file's first ``few_shot`` lines are shown before every question, and
  not asked.
- ``questions``: how many are asked; left out, derived from ``min_drop``, ``alpha``, ``beta``
  (at most what the file has).
- ``min_drop`` (3): θ, the smallest drop of the score to detect; ``alpha`` (0.05): the
  comparison's false-fail rate; ``beta`` (0.2): its miss rate at a drop of θ.
- ``min_score`` (0): a layout scoring below it fails.
- ``backend``: ``"builtin"`` (default: the plugin's client) or ``"lm-eval"`` (its
  ``local-completions`` model).
- ``max_tokens`` (32), ``stop`` (``["\\n"]``), ``concurrency`` (8 requests in flight),
  ``timeout_s`` (120 s per request).

The task file is read and checked here, before anything launches: a line that is not a JSON
object with a string ``prompt`` and ``answer`` names the file and its line. ``backend =
"lm-eval"`` without lm-eval installed is refused here too.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_ppsweep.matrix.schema import MatrixError, Reader, shown_value

__all__ = ["ACCURACY_KEYS", "BACKENDS", "METRICS", "AccuracySpec", "Task", "read_accuracy",
           "read_tasks"]

ACCURACY_KEYS = ("tasks", "metric", "regex", "few_shot", "questions", "min_drop", "alpha", "beta",
                 "min_score", "backend", "max_tokens", "stop", "concurrency", "timeout_s")
METRICS = ("exact", "regex")
BACKENDS = ("builtin", "lm-eval")
LM_EVAL_MODULE = "lm_eval"


@dataclass(frozen=True)
class Task:
    """One line of the task file."""

    prompt: str
    answer: str


@dataclass(frozen=True)
class AccuracySpec:
    """What the accuracy check asks each layout and how it decides. Scores, ``min_drop`` and
    ``min_score`` are fractions (the file says points: ÷ 100)."""

    tasks_path: Path
    tasks: tuple[Task, ...]
    metric: str = "exact"
    regex: str = ""
    few_shot: int = 0
    questions: int | None = None  # None: derived (stats/accuracytest.plan)
    min_drop: float = 0.03
    alpha: float = 0.05
    beta: float = 0.2
    min_score: float = 0.0
    backend: str = "builtin"
    max_tokens: int = 32
    stop: tuple[str, ...] = ("\n",)
    concurrency: int = 8
    timeout_s: float = 120.0

    @property
    def shots(self) -> tuple[Task, ...]:
        """The few-shot examples: the file's first ``few_shot`` lines."""
        return self.tasks[:self.few_shot]

    @property
    def pool(self) -> tuple[Task, ...]:
        """The questions that may be asked: every line after the shots, in file order."""
        return self.tasks[self.few_shot:]


def read_tasks(path: Path, where: str) -> tuple[Task, ...]:
    """The task file's lines (blank lines skipped); MatrixError naming ``where`` (the sweep
    file's key), the task file and its line on anything else."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MatrixError(f"{where}: expected a readable UTF-8 JSONL task file, found {path} "
                          f"({exc})") from exc
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise MatrixError(f"{where}: {path} line {number}: expected a JSON object, found "
                              f"{shown_value(line)} ({exc})") from exc
        if not isinstance(item, dict):
            raise MatrixError(f"{where}: {path} line {number}: expected a JSON object, found "
                              f"{shown_value(item)}")
        for key in ("prompt", "answer"):
            value = item.get(key)
            if not isinstance(value, str) or (key == "prompt" and not value):
                raise MatrixError(f"{where}: {path} line {number}: key {key!r}: expected a "
                                  f"{'non-empty ' if key == 'prompt' else ''}string, found "
                                  f"{shown_value(value)}")
        out.append(Task(item["prompt"], item["answer"]))
    if not out:
        raise MatrixError(f"{where}: expected a task file with at least one question, found "
                          f"{path} empty")
    return tuple(out)


def read_accuracy(top: Reader) -> AccuracySpec | None:
    """The ``[accuracy]`` table, validated with its task file; None when the file has none."""
    if "accuracy" not in top.data:
        return None
    c = top.table("accuracy")
    c.only(ACCURACY_KEYS)
    where = f"{c.path}: key 'accuracy.tasks'"
    name = c.text("tasks", required=True)
    path = Path(name) if Path(name).is_absolute() else Path(c.path).parent / name
    tasks = read_tasks(path, where)
    metric = c.choice("metric", METRICS, default="exact")
    regex = c.text("regex", default="")
    if metric == "regex":
        if not regex:
            raise MatrixError(f"{c.path}: key 'accuracy.regex': expected a regular expression "
                              f"(metric = \"regex\"), found nothing")
        try:
            re.compile(regex)
        except re.error as exc:
            raise MatrixError(f"{c.path}: key 'accuracy.regex': expected a valid regular "
                              f"expression, found {shown_value(regex)} ({exc})") from exc
    elif regex:
        raise MatrixError(f"{c.path}: key 'accuracy.regex': expected no regex with metric = "
                          f"\"exact\", found {shown_value(regex)}")
    few_shot = c.integer("few_shot", default=0, minimum=0, maximum=64)
    if few_shot >= len(tasks):
        raise MatrixError(f"{c.path}: key 'accuracy.few_shot': expected fewer shots than the "
                          f"task file's {len(tasks)} lines ({path}), found {few_shot}")
    questions = (c.integer("questions", minimum=1, maximum=1_000_000)
                 if "questions" in c.data else None)
    if questions is not None and questions > len(tasks) - few_shot:
        raise MatrixError(f"{c.path}: key 'accuracy.questions': expected at most the "
                          f"{len(tasks) - few_shot} questions of {path} (after {few_shot} "
                          f"shots), found {questions}")
    min_drop = c.number("min_drop", default=3.0, minimum=0.1)
    if min_drop > 100:
        raise MatrixError(f"{c.path}: key 'accuracy.min_drop': expected points in (0, 100], "
                          f"found {min_drop:g}")
    alpha, beta = c.number("alpha", default=0.05), c.number("beta", default=0.2)
    for key, value in (("alpha", alpha), ("beta", beta)):
        if not 0 < value < 0.5:
            raise MatrixError(f"{c.path}: key 'accuracy.{key}': expected a rate in (0, 0.5), "
                              f"found {value:g}")
    min_score = c.number("min_score", default=0.0, minimum=0.0)
    if min_score > 100:
        raise MatrixError(f"{c.path}: key 'accuracy.min_score': expected points in [0, 100], "
                          f"found {min_score:g}")
    backend = c.choice("backend", BACKENDS, default="builtin")
    if backend == "lm-eval" and importlib.util.find_spec(LM_EVAL_MODULE) is None:
        raise MatrixError(f"{c.path}: key 'accuracy.backend': expected \"builtin\" or an "
                          f"installed lm-eval, found \"lm-eval\" but the package is not "
                          f"installed (pip install 'lm-eval[api]')")
    stop = c.str_list("stop", default=["\n"])
    if any(not s for s in stop):
        raise MatrixError(f"{c.path}: key 'accuracy.stop': expected non-empty strings, found "
                          f"{shown_value(stop)}")
    return AccuracySpec(
        tasks_path=path, tasks=tasks, metric=metric, regex=regex, few_shot=few_shot,
        questions=questions, min_drop=min_drop / 100.0, alpha=alpha, beta=beta,
        min_score=min_score / 100.0, backend=backend,
        max_tokens=c.integer("max_tokens", default=32, minimum=1, maximum=4096),
        stop=tuple(stop),
        concurrency=c.integer("concurrency", default=8, minimum=1, maximum=256),
        timeout_s=c.number("timeout_s", default=120.0, minimum=0.1),
    )
