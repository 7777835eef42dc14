"""The run's status, always true, and the answers qualified by it (issue 39, point 1).

A run is ``running`` while it measures, then ``complete`` (every point of the sweep measured at
every C of its selection), ``partial`` (points deselected, failed or not run) or ``interrupted``
(Ctrl-C, SIGTERM or SIGHUP ended the session). The session's state machine
(session/runstate.py) says which; this module holds the rules that are plain data: which points
count as measured, the status's detail for run.json, its terminal lines, and
:func:`qualify`: an interrupted or partial run never says ``decided`` about the whole question.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_ppsweep.results.answers import DECIDED, Answer

__all__ = ["COMPLETE", "INTERRUPTED", "INTERRUPTED_BOOT", "PARTIAL", "RUNNING", "RunStatus",
           "measured_points", "qualify", "resume_command"]

RUNNING = "running"
COMPLETE = "complete"
PARTIAL = "partial"
INTERRUPTED = "interrupted"
STATUSES = (RUNNING, COMPLETE, PARTIAL, INTERRUPTED)
# configs.csv boot_error of a layout whose boot a Ctrl-C/SIGTERM/SIGHUP stopped: not a failure
INTERRUPTED_BOOT = "interrupted during its boot (Ctrl-C, SIGTERM or SIGHUP)"


@dataclass(frozen=True)
class RunStatus:
    """The run's status and its detail: the points measured and missing (sweep order), the point
    the run was at when interrupted, and the command that resumes it (None when complete)."""

    status: str
    measured: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    interrupted_at: str | None = None
    resume: str | None = None

    @property
    def total(self) -> int:
        return len(self.measured) + len(self.missing)

    def detail(self) -> dict[str, Any]:
        """run.json's ``run_status_detail``."""
        return {"measured": list(self.measured), "missing": list(self.missing),
                "interrupted_at": self.interrupted_at, "resume": self.resume}

    def lines(self) -> list[str]:
        """The terminal's status line and, unless complete, the resume command."""
        m, n = len(self.measured), self.total
        if self.status == INTERRUPTED:
            at = f" during {self.interrupted_at}" if self.interrupted_at else ""
            head = f"run status: INTERRUPTED{at}, after {m} of {n} layouts"
        elif self.status == PARTIAL:
            head = f"run status: PARTIAL, {m} of {n} layouts measured"
        else:
            head = f"run status: {self.status.upper()}, {m} of {n} layouts measured"
        if self.missing and self.status != COMPLETE:
            head += f"; not measured: {', '.join(self.missing)}"
        lines = [head]
        if self.resume:
            lines.append(f"resume: {self.resume}")
        return lines


def measured_points(order: Sequence[str], wanted: Mapping[str, Iterable[int]],
                    rounds: Iterable[tuple[str, int]]) -> tuple[list[str], list[str]]:
    """The points of ``order`` measured and missing: a point is measured when ``rounds``
    ((config id, C) of every round recorded) holds one at each C ``wanted`` for it (any C when
    its selection names none); a point not in ``wanted`` (deselected) is missing."""
    seen: dict[str, set[int]] = {}
    for cid, conc in rounds:
        seen.setdefault(cid, set()).add(conc)
    measured: list[str] = []
    missing: list[str] = []
    for cid in order:
        want = set(wanted[cid]) if cid in wanted else None
        got = seen.get(cid, set())
        ok = want is not None and bool(got) and want <= got
        (measured if ok else missing).append(cid)
    return measured, missing


def resume_command(args: Sequence[str], run_id: str) -> str:
    """``pytest <args> --ppsweep-resume <run_id>``: the command line of this run, without its
    own --ppsweep-resume/--ppsweep-run-id, resuming this run folder."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("--ppsweep-resume", "--ppsweep-run-id"):
            skip = True
            continue
        if arg.startswith(("--ppsweep-resume=", "--ppsweep-run-id=")):
            continue
        kept.append(arg)
    return shlex.join(["pytest", *kept, "--ppsweep-resume", run_id])


def _names(points: Sequence[str]) -> str:
    if len(points) <= 1:
        return "".join(points)
    return ", ".join(points[:-1]) + f" and {points[-1]}"


def qualify(answers: Sequence[Answer], status: RunStatus) -> list[Answer]:
    """The answers as an interrupted or partial run may give them: an interrupted run's every
    answer says ``interrupted`` (with what was measured and that nothing else was compared), a
    partial run's decided answers say ``partial`` and name the points not run; a complete (or
    running) run's answers are returned as they are."""
    if status.status not in (INTERRUPTED, PARTIAL):
        return list(answers)
    m, n = len(status.measured), status.total
    measured = ", ".join(status.measured) or "none"
    out = []
    for a in answers:
        if status.status == PARTIAL and a.status != DECIDED:
            out.append(a)
            continue
        if m < 2:
            text = f"{measured} measured; nothing compared"
        elif a.status == DECIDED:
            text = f"{a.answer} leads among {measured}; {_names(status.missing)} not run"
        else:
            text = f"{a.status} among {measured}; {_names(status.missing)} not run"
        if status.status == INTERRUPTED:
            text = f"interrupted after {m} of {n} layouts: {text}"
        elif a.status == DECIDED and m >= 2:
            text = (f"decided among {m} of {n} layouts: {a.answer}; "
                    f"{_names(status.missing)} not run")
        else:
            text = f"{m} of {n} layouts: {text}"
        own = str(a.extra.get("text", "")).strip()
        extra = {**a.extra, "text": text + (f". {own}" if own else ""),
                 "run_status": status.status, "status_before": a.status,
                 "leader": a.answer}
        out.append(replace(a, status=status.status, answer=None, fallback=None, extra=extra))
    return out
