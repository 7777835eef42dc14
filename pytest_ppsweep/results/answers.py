"""The answers of a run: one per question its points ask (``answers.json``).

A question is found from the sweep's points by a **finder**: a function of an
:class:`AnswerInput` (the run folder read and judged once) that returns :class:`Answer` s. The
built-in finders (results/questions.py) ask the layout question of each workload and the axis
question of each layout × axis; another kind of question plugs in with one line in
``results/finders.py`` (or :func:`register` at run time). Every finder compares points through
``results.decide`` (the decision rule of ``stats/decision.py``: a Welch interval on each
comparison, Holm over the question, TOST for equivalence), so an answer's evidence always means
the same thing.

Statuses (one vocabulary with the run status): ``decided`` (the winner beats every
rival beyond noise, or the tie-break decides among rivals shown equivalent to it), ``equivalent``
(the top points are shown equivalent within ``[compare] min_effect_pct`` and nothing separates
them), ``inconclusive`` (the data cannot separate the top points: ``rerun`` says what to run),
``measured`` (a single valid point: nothing was compared) and ``no valid point``.

``answers.json``: ``{"format": "ppsweep-answers/1", "run_id": ..., "answers": [<Answer>...]}``,
each answer as :meth:`Answer.as_dict` writes it (docs/guides/decisions.md: "answers.json").
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ppsweep.folder.runfolder import ANSWERS_JSON

if TYPE_CHECKING:
    from pytest_ppsweep.results.aggregate import RunData, Summary
    from pytest_ppsweep.results.verdict import Verdict

FORMAT = "ppsweep-answers/1"
FILE_NAME = ANSWERS_JSON

KINDS = ("layout", "axis", "slo")
DECIDED = "decided"
# A leader separated by rounds of one boot per layout, with no boot-to-boot variance known and
# a gap inside the stated one-boot bound: a boot offset could reverse it (stats/decision.py).
DECIDED_ONE_BOOT = "decided within one boot"
ONE_BOOT_NOTE = "Decided within one boot"  # the reason that says why (results/decide.py)
CLAIMS = (DECIDED, DECIDED_ONE_BOOT)  # the statuses that name a winner
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"
MEASURED = "measured"
NO_VALID_POINT = "no valid point"
STATUSES = (DECIDED, DECIDED_ONE_BOOT, EQUIVALENT, INCONCLUSIVE, MEASURED, NO_VALID_POINT)

# Verdicts of one comparison (Evidence.verdict), from the first point's side.
BETTER = "better"
WORSE = "worse"
WITHIN_NOISE = "within noise"  # neither different nor shown equivalent
# (EQUIVALENT, "equivalent", is also a comparison's verdict: inside ±min_effect by TOST)
NOT_COMPARED = "not compared"
# An excluded point whose boot failed the way the sweep's [[expect]] said (its ``why`` in
# Answer.excluded: ``OOM, as expected: <reason>``; results/questions.py writes it)
AS_EXPECTED = ", as expected"

# The level of an answer's evidence: the reason that states it starts with
# one of these (results/questions.py, results/sloanswer.py; the terminal's paragraph shows it).
SINGLE_BOOT_NOTE = "Single boot per layout"
TWO_LEVEL_NOTE = "Two levels"
ONE_LEVEL_NOTE = "One level"


@dataclass(frozen=True)
class Evidence:
    """One comparison inside a decision: ``point`` against ``versus`` at one C on one metric.

    ``delta_pct``: point vs versus, the ratio of their geometric means − 1 in % (the metric's
    own sign: + is more); ``noise_pct``: the half-width of its (1 − α) Welch interval, in %
    (``low_pct``..``high_pct``: the interval itself); ``p_value``: two-sided, before Holm;
    ``verdict``: ``better``/``worse`` (beyond noise after Holm), ``equivalent`` (TOST within
    ±min_effect) or ``within noise`` for ``point`` given the metric's direction, or ``not
    compared`` (``note`` says why)."""

    point: str
    versus: str
    concurrency: int
    metric: str
    delta_pct: float
    noise_pct: float
    verdict: str
    repeats: tuple[int, int] = (0, 0)
    note: str = ""
    low_pct: float = float("nan")
    high_pct: float = float("nan")
    p_value: float = float("nan")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN as null)."""
        return {"point": self.point, "versus": self.versus, "concurrency": self.concurrency,
                "metric": self.metric, "delta_pct": _num(self.delta_pct),
                "noise_pct": _num(self.noise_pct), "low_pct": _num(self.low_pct),
                "high_pct": _num(self.high_pct), "p_value": _full(self.p_value),
                "verdict": self.verdict, "repeats": list(self.repeats), "note": self.note}


@dataclass(frozen=True)
class Answer:
    """The answer to one question of the run.

    ``answer``: the chosen point (or layout) id, None unless decided; ``fallback``: the
    runner-up; ``ranking``: every candidate best first; ``excluded``: (point, why) for points
    left out (N/N, topology, log scan, boot); ``rerun``: the command that would separate the
    top points when inconclusive; ``table``: rows for a small table (axis questions: one per
    value with booted / headroom / Δ objective); ``extra``: anything a kind adds (kept in JSON).
    """

    kind: str
    workload: str
    question: str
    objective: tuple[str, ...]
    status: str
    answer: str | None = None
    fallback: str | None = None
    ranking: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    rerun: str | None = None
    reasons: tuple[str, ...] = ()
    excluded: tuple[tuple[str, str], ...] = ()
    caveats: tuple[str, ...] = ()
    layout: str | None = None
    axis: str | None = None
    table: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def line(self) -> str:
        """One line: ``layout[prefill]: decided pp8-tp4-ep4 (fallback pp4-tp8-ep4)``."""
        where = self.workload + (f" {self.layout}" if self.layout else "")
        what = self.kind + (f" {self.axis}" if self.axis else "") + (
            f" {self.extra['aspect']}" if self.extra.get("aspect") else "")
        if self.status in (DECIDED, DECIDED_ONE_BOOT):
            tail = f"{self.answer}" + (f" (fallback {self.fallback})" if self.fallback else "")
        elif self.status == MEASURED:
            tail = f"{self.answer}"
        elif self.status == INCONCLUSIVE:
            tail = "between " + ", ".join(self.ranking[:2])
        elif self.status == EQUIVALENT:
            tail = ", ".join(self.extra.get("equivalent") or self.ranking[:2])
        else:
            tail = ""
        return f"{what}[{where}]: {self.status}" + (f" {tail}" if tail else "")

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of answers.json (docs/guides/decisions.md: "answers.json")."""
        return {"kind": self.kind, "workload": self.workload, "question": self.question,
                "objective": list(self.objective), "status": self.status,
                "answer": self.answer, "fallback": self.fallback, "ranking": list(self.ranking),
                "evidence": [e.as_dict() for e in self.evidence], "rerun": self.rerun,
                "reasons": list(self.reasons),
                "excluded": [{"point": p, "why": w} for p, w in self.excluded],
                "caveats": list(self.caveats), "layout": self.layout, "axis": self.axis,
                "table": [_jsonable(r) for r in self.table], **_jsonable(self.extra)}


@dataclass(frozen=True, eq=False)
class AnswerInput:
    """What every finder reads: the run folder loaded, summarised and judged once.

    ``points``: run.json ``points`` (``{}`` for a sweep without axes); ``objectives``: per
    workload name its ranking metrics (``results.questions.objective_of``); ``command``: the
    pytest command line that re-runs points of this run (``rerun`` starts with it)."""

    data: RunData
    summary: Summary
    verdicts: tuple[Verdict, ...]
    points: dict[str, dict[str, Any]]
    objectives: dict[str, tuple[str, ...]]
    command: str = "pytest test_matrix"
    # Finders' shared computations of this input (e.g. the repeats per metric), by name.
    cache: dict[str, Any] = field(default_factory=dict)


Finder = Callable[[AnswerInput], list[Answer]]
_REGISTERED: list[Finder] = []


def expected_failures(answers: Sequence[Answer]) -> dict[str, str]:
    """Per point whose failure the sweep expected, why (``OOM, as expected: <reason>``): the
    verdicts show it beside their INVALID."""
    return {cid: why for a in answers for cid, why in a.excluded if AS_EXPECTED in why}


def register(finder: Finder) -> Finder:
    """Add a finder for this process (usable as a decorator); kept once."""
    if finder not in _REGISTERED:
        _REGISTERED.append(finder)
    return finder


def write_answers(run_dir: Path, run_id: str, answers: Sequence[Answer],
                  energy: dict[str, Any] | None = None) -> Path:
    """``<run_dir>/answers.json`` atomically (a reader never sees half a file); ``energy``:
    each point's energy per token (results/aggregate.energy_points), beside the answers."""
    path = Path(run_dir) / FILE_NAME
    body: dict[str, Any] = {"format": FORMAT, "run_id": run_id,
                            "answers": [a.as_dict() for a in answers]}
    if energy is not None:
        body["energy"] = energy
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(body, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_answers(run_dir: Path) -> list[dict[str, Any]]:
    """The answers of ``answers.json`` as written ([] when the run has none or it is broken)."""
    try:
        raw = json.loads((Path(run_dir) / FILE_NAME).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return []
    items = raw.get("answers") if isinstance(raw, dict) else None
    return [a for a in items if isinstance(a, dict)] if isinstance(items, list) else []


def one_line(answers: Sequence[dict[str, Any]]) -> str:
    """A run's answers in one line for ``runs``/``show`` (from answers.json's dicts)."""
    parts = []
    for a in answers:
        where = " ".join(str(a[k]) for k in ("workload", "layout") if a.get(k))
        what = str(a.get("kind")) + (f" {a['axis']}" if a.get("axis") else "") + (
            f" {a['aspect']}" if a.get("aspect") else "")
        status = str(a.get("status"))
        value = a.get("answer") if status == DECIDED else None
        if status == DECIDED_ONE_BOOT:
            value = f"{a.get('answer')} ({DECIDED_ONE_BOOT})"
        if status == EQUIVALENT:
            value = "equivalent " + " = ".join(str(p) for p in a.get("equivalent") or
                                               a.get("ranking", [])[:2])
        elif status == MEASURED:
            value = f"measured {a.get('answer') or ''}".strip()
        parts.append((f"{what}[{where}] " if where else f"{what} ")
                     + (str(value) if value else status))
    return "; ".join(parts) if parts else "no answers"


def _full(value: float) -> float | None:
    """A value kept in full (a p-value of 1e-9 is no 0.0): NaN and infinities as null."""
    return None if value != value or value in (float("inf"), float("-inf")) else float(value)


def _num(value: float) -> float | None:
    return None if value != value or value in (float("inf"), float("-inf")) else round(value, 4)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return _num(value)
    if value is None or isinstance(value, str | int | bool):
        return value
    try:
        return _num(float(value))  # numpy / pandas scalars
    except (TypeError, ValueError):
        return str(value)
