"""Run set-up before the first test (controller, and the worker's view of it): the run folder
(new, the controller's, or a resumed one) and the reuse/resume plan. Options are read by
:mod:`.options`; this module only acts on them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_ppsweep import continuity
from pytest_ppsweep.measure.runstore import RunStore, new_run_id
from pytest_ppsweep.session import options

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Cluster, Sweep

__all__ = ["open_store", "plan"]


def plan(
    config: pytest.Config,
    sweep: Sweep,
    pool: tuple[Cluster, ...],
    store: RunStore,
    ids: list[str],
    reuse_ref: Path | None,
) -> continuity.Plan:
    """What continuity decides before any boot: the layouts and points to skip, and why."""
    try:
        plan = continuity.Plan()
        if options.get(config, "ppsweep_resume"):
            plan = continuity.resume(sweep, pool, store, ids)
        if reuse_ref is not None:
            plan = continuity.reuse(sweep, pool, store, ids, reuse_ref, plan)
    except continuity.ContinuityError as exc:
        raise pytest.UsageError(str(exc)) from None
    return plan


def open_store(config: pytest.Config, sweep: Sweep, run_id: str | None) -> RunStore:
    """The run folder: a new one, the controller's (xdist workers), or a resumed one."""
    resumed = options.get(config, "ppsweep_resume")
    if resumed and not run_id:
        folder = options.path_arg(config, resumed)
        if not folder.is_dir():
            folder = options.reports_root(config) / resumed
        if not (folder / "metadata" / "run.json").is_file():
            raise pytest.UsageError(
                f"--ppsweep-resume {resumed}: expected a run folder with metadata/run.json, "
                f"found none at {folder}"
            )
        return RunStore(folder.parent, folder.name)
    if resumed and run_id:
        folder = options.path_arg(config, resumed)
        root = folder.parent if folder.is_dir() else options.reports_root(config)
        return RunStore(root, run_id)
    rid = run_id or options.get(config, "ppsweep_run_id") or new_run_id(sweep.name)
    return RunStore(options.reports_root(config), rid)
