"""The run's status as plain data: its four words, :class:`RunStatus` (the points
measured and missing, where it was interrupted, the resume command; while it runs, what each
busy layout does and the points not reached yet) and :class:`Activity`. Imports nothing of the
answers, so that the run folder's data (results/aggregate.RunMeta) can carry a status;
results/runstatus.py holds the rules (measured points, the resume command, qualify)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

__all__ = ["COMPLETE", "INTERRUPTED", "INTERRUPTED_BOOT", "PARTIAL", "RESUME_PREFIX", "RUNNING",
           "STATUSES", "Activity", "RunStatus"]

RUNNING = "running"
COMPLETE = "complete"
PARTIAL = "partial"
INTERRUPTED = "interrupted"
STATUSES = (RUNNING, COMPLETE, PARTIAL, INTERRUPTED)
# configs.csv boot_error of a layout whose boot a Ctrl-C/SIGTERM/SIGHUP stopped: not a failure
INTERRUPTED_BOOT = "interrupted during its boot (Ctrl-C, SIGTERM or SIGHUP)"
# the line that holds the resume command (a terminal never wraps it: it is copied whole)
RESUME_PREFIX = "resume: "


@dataclass(frozen=True)
class Activity:
    """What one layout of a running sweep is doing (the run folder's live record): its phase
    (``booting``, ``benchmark c8 r2/3``, ``teardown``…) and the phase's detail, since when
    (epoch), and whether a step runs now (``active``) or the layout waits between two."""

    layout: str
    phase: str
    detail: str = ""
    since: float = 0.0
    active: bool = True

    def text(self, now: float) -> str:
        """``pp2-tp16-ep4 booting for 12 s (ranks ready 2/4)``, or, between two steps,
        ``pp2-tp16-ep4 booted, between tests for 1 s``."""
        took = f"{max(0.0, now - self.since):.0f} s" if self.since else "?"
        if not self.active:
            done = "booted" if self.phase == "booting" else f"{self.phase} done"
            return f"{self.layout} {done}, between tests for {took}"
        return f"{self.layout} {self.phase} for {took}" + (
            f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class RunStatus:
    """The run's status and its detail: the points measured and missing (sweep order), the point
    the run was at when interrupted, and the command that resumes it (None when complete).
    While it runs: what each busy layout is doing (``now``) and the points not reached yet
    (``pending``); ``note``: why the status is what it is when the folder alone says so (a
    process that ended without closing the run); ``expected``: the missing points that failed
    as the sweep expected ([[expect]]: the answers' evidence, shown so)."""

    status: str
    measured: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    interrupted_at: str | None = None
    resume: str | None = None
    now: tuple[Activity, ...] = ()
    pending: tuple[str, ...] = ()
    note: str = ""
    # the missing points whose failure the sweep's [[expect]] named (the answers say so)
    expected: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return len(self.measured) + len(self.missing)

    def detail(self) -> dict[str, Any]:
        """run.json's ``run_status_detail``."""
        return {"measured": list(self.measured), "missing": list(self.missing),
                "interrupted_at": self.interrupted_at, "resume": self.resume}

    def headline(self) -> str:
        """``INTERRUPTED during pp2-tp16-ep4, after 1 of 5 layouts`` /
        ``RUNNING, 1 of 5 layouts measured`` / ``COMPLETE, 5 of 5 layouts measured``."""
        m, n = len(self.measured), self.total
        if self.status == INTERRUPTED:
            at = f" during {self.interrupted_at}" if self.interrupted_at else ""
            return f"INTERRUPTED{at}, after {m} of {n} layouts"
        return f"{self.status.upper()}, {m} of {n} layouts measured"

    def brief(self, now: float | None = None) -> str:
        """The status in one line (``runs``): its headline and, while running, what each busy
        layout does."""
        text = self.headline().lower()
        if self.status == RUNNING and self.now:
            clock = time.time() if now is None else now
            text += "; now: " + "; ".join(a.text(clock) for a in self.now)
        return text

    def lines(self, now: float | None = None) -> list[str]:
        """The terminal's status line and, unless complete, the resume command; while the run
        runs, what each busy layout is doing and the points not reached yet."""
        head = f"run status: {self.headline()}"
        if self.status == RUNNING:
            if self.measured:
                head += f": {', '.join(self.measured)}"
            clock = time.time() if now is None else now
            busy = {a.layout for a in self.now}
            lines = [head, *(f"now: {a.text(clock)}" for a in self.now)]
            if self.pending:
                lines.append(f"pending: {', '.join(self.pending)}")
            stopped = [c for c in self.missing if c not in busy and c not in self.pending]
            if stopped:
                lines.append(f"not measured: {', '.join(stopped)}")
            return lines
        if self.missing and self.status != COMPLETE:
            head += "; not measured: " + ", ".join(
                f"{c} (failed as expected)" if c in self.expected else c for c in self.missing)
        lines = [head]
        if self.note:
            lines.append(f"({self.note})")
        if self.missing and set(self.missing) <= set(self.expected):
            # a resume would boot them again only to fail as expected: nothing is left to do
            lines.append("(nothing to resume: every point not measured failed as the sweep "
                         "expects)")
        elif self.resume:
            lines.append(f"{RESUME_PREFIX}{self.resume}")
        return lines
