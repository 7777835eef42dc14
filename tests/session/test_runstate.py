"""session/runstate.py: the legal paths of a run's life, and every illegal step raises."""

from __future__ import annotations

import itertools

import pytest

from pytest_ppsweep.session.runstate import (
    TRANSITIONS,
    IllegalTransition,
    Phase,
    Quiet,
    RunState,
)

POINTS = {"pp1-tp32-ep4": {8}}


def test_a_measuring_controller_goes_the_full_path() -> None:
    state = RunState(made_folder=True)
    assert not state.selected and not state.nodes_known
    state.select(POINTS)
    assert state.selected
    state.allocated()
    assert state.nodes_known and state.may_preflight
    state.preflown()
    assert not state.may_preflight  # once
    state.running()
    assert state.measuring and state.finishes and not state.quiet
    state.finished()
    assert not state.finishes  # once
    state.closed()
    assert [p.value for p in state._passed] == [
        "configured", "selected", "allocated", "preflown", "running", "finished", "closed"]


def test_nodes_known_at_configure_come_before_the_selection() -> None:
    state = RunState()
    state.allocated()  # no slurm cluster, or allocated at configure (resume, reuse)
    state.select(POINTS)
    assert state.may_preflight
    state.preflown()
    state.running()
    state.finished()
    state.closed()


@pytest.mark.parametrize("why", [Quiet.DRY_RUN, Quiet.COLLECT_ONLY])
def test_a_quiet_run_known_at_configure(why: Quiet) -> None:
    state = RunState()
    state.allocated()
    state.go_quiet(why)
    state.select(POINTS)  # recorded (the dry run plans it), no step
    assert state.phase is Phase.QUIET and state.quiet and state.forgets_folder
    assert state.dry_run is (why is Quiet.DRY_RUN)
    assert not state.may_preflight and not state.finishes
    state.closed()


def test_an_empty_selection_in_a_folder_made_here_is_quiet() -> None:
    state = RunState(made_folder=True)
    state.select({})
    state.go_quiet(Quiet.EMPTY)
    assert state.quiet and not state.dry_run and not state.finishes
    with pytest.raises(IllegalTransition):
        state.allocated()
    state.closed()


def test_an_empty_selection_in_a_resumed_folder_finishes_without_measuring() -> None:
    state = RunState(made_folder=False)
    state.select({})
    assert not state.may_preflight and state.finishes
    state.finished()
    assert not state.measuring
    state.closed()


@pytest.mark.parametrize("made", [True, False])
def test_a_refused_run_never_finishes(made: bool) -> None:
    state = RunState(made_folder=made)
    state.select(POINTS)
    state.allocated()
    state.preflown()
    state.refused()  # a node refused by the preflight
    assert state.is_refused and not state.finishes
    assert state.quiet is made and state.forgets_folder is made  # a resumed folder is kept
    with pytest.raises(IllegalTransition):
        state.running()
    state.closed()


def test_an_allocation_refused_at_the_selection() -> None:
    state = RunState(made_folder=True)
    state.select(POINTS)
    state.refused()
    assert not state.nodes_known and state.quiet
    state.closed()


def test_an_xdist_worker_allocates_runs_and_closes() -> None:
    state = RunState(worker=True)
    assert not state.finishes and not state.may_preflight
    with pytest.raises(IllegalTransition, match="worker does not select"):
        state.select(POINTS)
    state.allocated()  # at its first test (a slurm cluster's: the controller's allocation)
    state.running()
    state.closed()


def test_a_session_may_close_from_any_state_but_only_once() -> None:
    for phase in Phase:
        state = RunState()
        state.phase = phase
        if phase is Phase.CLOSED:
            with pytest.raises(IllegalTransition, match="closed twice"):
                state.closed()
        else:
            state.closed()


def test_steps_the_table_does_not_list_raise() -> None:
    steps = {
        Phase.SELECTED: lambda s: s.select(POINTS),
        Phase.ALLOCATED: RunState.allocated,
        Phase.PREFLOWN: RunState.preflown,
        Phase.RUNNING: RunState.running,
        Phase.FINISHED: RunState.finished,
        Phase.QUIET: lambda s: s.go_quiet(Quiet.EMPTY),
        Phase.REFUSED: RunState.refused,
    }
    checked = 0
    for source, target in itertools.product(Phase, steps):
        if target in TRANSITIONS[source] or (source, target) == (Phase.QUIET, Phase.SELECTED):
            continue  # legal (a quiet run records its selection without a step)
        state = RunState()
        state.phase = source
        with pytest.raises(IllegalTransition):
            steps[target](state)
        checked += 1
    assert checked > 40


def test_the_preflight_needs_the_nodes_and_a_point() -> None:
    state = RunState()
    state.select({})  # empty
    state.allocated()
    with pytest.raises(IllegalTransition, match="preflight"):
        state.preflown()
    slurm = RunState()
    slurm.select(POINTS)
    with pytest.raises(IllegalTransition, match="preflight"):
        slurm.preflown()  # no allocation yet


def test_selected_twice_raises() -> None:
    state = RunState()
    state.select(POINTS)
    with pytest.raises(IllegalTransition, match="selected twice"):
        state.select(POINTS)


def test_the_run_status_comes_from_the_state() -> None:
    state = RunState()
    state.allocated()
    state.select(POINTS)
    with pytest.raises(IllegalTransition, match="no run status"):
        state.run_status(all_measured=True)
    state.preflown()
    state.running()
    assert state.run_status(all_measured=False) == "running"
    state.finished()
    assert [state.run_status(True), state.run_status(False)] == ["complete", "partial"]
    stopped = RunState()
    stopped.allocated()
    stopped.select(POINTS)
    stopped.preflown()
    stopped.running()
    stopped.finished(interrupted=True)
    assert stopped.run_status(all_measured=True) == "interrupted"
