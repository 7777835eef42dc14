"""The life of a sweep run in one pytest process, as an explicit state machine.

The full path of a controller that measures::

    configured → selected → allocated → preflown → running → finished → closed

and the legitimate short paths:

- nodes known before the selection (a pool without a slurm cluster, or one allocated at
  configure because resume/reuse/baseline-from compare manifests that name the nodes):
  ``configured → allocated → selected → preflown → …``;
- a quiet run, in which nothing boots: ``--ppsweep-dry-run`` or ``--collect-only`` (known at
  configure), or a selection that matches no point in a run folder this process made (known
  after collection): ``… → quiet → closed``;
- a selection that matches no point in a folder this process did not make (a resumed run):
  ``selected → finished → closed``, nothing booted;
- a run refused before its first boot (a claim or node refused, an allocation not granted, a
  Ctrl-C/SIGTERM while it waited for them): ``… → refused → closed``;
- an xdist worker: ``configured → allocated → running → closed`` (its controller selects,
  preflies and finishes);
- a session that ends early (a collection error, a Ctrl-C before the selection):
  ``… → closed`` from any state.

The run's status in run.json and the answers (``running``, ``complete``, ``partial``,
``interrupted``: :meth:`RunState.run_status`) comes from here.

Every decision the session used to spread over flags (``quiet``, ``refused``, ``made_folder``,
``nodes_known``, ``preflown``, ``dry_run``, ``selected is None``) is a query here. A transition
that the table below does not list raises :class:`IllegalTransition`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["IllegalTransition", "Phase", "Quiet", "RunState"]


class Phase(enum.Enum):
    CONFIGURED = "configured"
    SELECTED = "selected"
    ALLOCATED = "allocated"
    PREFLOWN = "preflown"
    RUNNING = "running"
    FINISHED = "finished"
    CLOSED = "closed"
    QUIET = "quiet"
    REFUSED = "refused"


class Quiet(enum.Enum):
    """Why nothing boots in a quiet run."""

    DRY_RUN = "--ppsweep-dry-run"
    COLLECT_ONLY = "--collect-only"
    EMPTY = "an empty selection"


P = Phase
# state → the states it may go to (closed is reachable from every state but itself)
TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    # a collection error ends a controller before its selection: finished (nothing measured)
    P.CONFIGURED: frozenset({P.SELECTED, P.ALLOCATED, P.QUIET, P.FINISHED}),
    P.SELECTED: frozenset({P.ALLOCATED, P.PREFLOWN, P.QUIET, P.REFUSED, P.FINISHED}),
    # nodes known at configure: the selection comes after; a worker runs from here
    P.ALLOCATED: frozenset({P.SELECTED, P.PREFLOWN, P.RUNNING, P.QUIET, P.REFUSED,
                            P.FINISHED}),
    P.PREFLOWN: frozenset({P.RUNNING, P.REFUSED, P.FINISHED}),
    P.RUNNING: frozenset({P.FINISHED}),
    P.FINISHED: frozenset(),
    P.QUIET: frozenset(),
    P.REFUSED: frozenset(),
    P.CLOSED: frozenset(),
}


class IllegalTransition(RuntimeError):
    """A session asked to go where its run's life does not lead (a bug in the session)."""


class RunState:
    """Where one pytest process is in its run, and what that decides."""

    def __init__(self, *, worker: bool = False, made_folder: bool = False) -> None:
        """``worker``: an xdist worker; ``made_folder``: this process made the run folder (not a
        resumed run's, nor an earlier one named again by --ppsweep-run-id): only such a folder
        is removed by a run that records nothing."""
        self.worker = worker
        self.made_folder = made_folder
        self.phase = Phase.CONFIGURED
        self._passed: list[Phase] = [Phase.CONFIGURED]
        self.quiet_because: Quiet | None = None
        self.selection: dict[str, set[int]] | None = None
        self.interrupted = False  # the session ended by Ctrl-C, SIGTERM or SIGHUP

    def __repr__(self) -> str:
        return f"RunState({' → '.join(p.value for p in self._passed)})"

    # -- transitions ----------------------------------------------------------------------------

    def _to(self, phase: Phase) -> None:
        if phase is not Phase.CLOSED and phase not in TRANSITIONS[self.phase]:
            raise IllegalTransition(f"run state: {self.phase.value} → {phase.value} is not a "
                                    f"step of a run (passed: {self!r})")
        if phase is Phase.CLOSED and self.phase is Phase.CLOSED:
            raise IllegalTransition("run state: closed twice")
        self.phase = phase
        self._passed.append(phase)

    def go_quiet(self, why: Quiet) -> None:
        """Nothing boots: a dry run or --collect-only (at configure), or an empty selection."""
        self.quiet_because = why
        self._to(Phase.QUIET)

    def select(self, points: dict[str, set[int]]) -> None:
        """The controller's selection (the layouts and Cs left after -k/-m). In a quiet run it is
        recorded without a step (the dry run plans it)."""
        if self.worker:
            raise IllegalTransition("run state: an xdist worker does not select")
        if self.selection is not None:
            raise IllegalTransition("run state: selected twice")
        self.selection = points
        if self.phase is not Phase.QUIET:
            self._to(Phase.SELECTED)

    def allocated(self) -> None:
        """The pool's nodes are known (a slurm cluster's allocation made or taken, or no slurm
        cluster in the pool)."""
        self._to(Phase.ALLOCATED)

    def preflown(self) -> None:
        """The preflight starts (claims, leftovers, node checks): once, with the nodes known."""
        if not self.nodes_known or not self.selection:
            raise IllegalTransition("run state: preflight before the nodes and a selection "
                                    "that holds a point are known")
        self._to(Phase.PREFLOWN)

    def running(self) -> None:
        """Measuring starts: the controller after its preflight, a worker at its first test."""
        self._to(Phase.RUNNING)

    def refused(self) -> None:
        """A usage error or a Ctrl-C/SIGTERM before the first boot stopped the run."""
        self._to(Phase.REFUSED)

    def finished(self, interrupted: bool = False) -> None:
        """The controller closes the run folder (pytest_sessionfinish); ``interrupted``: the
        session ended by Ctrl-C, SIGTERM or SIGHUP."""
        self._to(Phase.FINISHED)
        self.interrupted = interrupted

    def closed(self) -> None:
        """pytest_unconfigure: everything is stopped and released."""
        self._to(Phase.CLOSED)

    # -- queries --------------------------------------------------------------------------------

    def passed(self, phase: Phase) -> bool:
        """The run went through ``phase`` (or is in it)."""
        return phase in self._passed

    @property
    def is_refused(self) -> bool:
        """A usage error stopped the run before its first boot."""
        return self.passed(Phase.REFUSED)

    @property
    def dry_run(self) -> bool:
        return self.quiet_because is Quiet.DRY_RUN

    @property
    def forgets_folder(self) -> bool:
        """The run's folder goes at the end: a quiet run, or one refused whose folder this
        process made (a resumed run's folder is kept as it was)."""
        return self.passed(Phase.QUIET) or (self.is_refused and self.made_folder)

    @property
    def quiet(self) -> bool:
        """Nothing boots and nothing is looked for on the nodes: a quiet run, or a refused one
        whose folder this process made."""
        return self.forgets_folder

    @property
    def nodes_known(self) -> bool:
        """The pool's nodes are its allocation's (or it has no slurm cluster)."""
        return self.passed(Phase.ALLOCATED)

    @property
    def selected(self) -> bool:
        """The controller knows its selection (after collection; under xdist after the first
        worker's collection)."""
        return self.selection is not None

    @property
    def may_preflight(self) -> bool:
        """The preflight is due: a controller that is not quiet, whose selection holds a point
        and that has not preflown yet."""
        return (not self.worker and not self.quiet and bool(self.selection)
                and self.phase in (Phase.SELECTED, Phase.ALLOCATED))

    @property
    def finishes(self) -> bool:
        """The controller closes the run folder and shows the summary: not a worker, nor a quiet
        or refused run, nor one finished already."""
        return not (self.worker or self.quiet or self.is_refused
                    or self.passed(Phase.FINISHED) or self.phase is Phase.CLOSED)

    def run_status(self, all_measured: bool) -> str:
        """The run's status: ``running`` while it measures, then ``interrupted``
        (the session was), ``complete`` (every selected point measured: ``all_measured``) or
        ``partial``."""
        if self.phase is Phase.RUNNING:
            return "running"
        if not self.passed(Phase.FINISHED):
            raise IllegalTransition(f"run state: no run status in {self.phase.value}")
        if self.interrupted:
            return "interrupted"
        return "complete" if all_measured else "partial"

    @property
    def measuring(self) -> bool:
        """The run started measuring (and was not refused)."""
        return self.passed(Phase.RUNNING)
