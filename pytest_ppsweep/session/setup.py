"""Run set-up before the first test (controller, and the worker's view of it): the run folder
(new, the controller's, or a resumed one), the slurm clusters' allocations and the reuse/resume
plan. Options are read by
:mod:`.options`; this module only acts on them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_ppsweep import continuity
from pytest_ppsweep.cluster import backends
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.measure.runstore import RunStore, new_run_id
from pytest_ppsweep.session import options
from pytest_ppsweep.session.signals import stopping_as_ctrl_c

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Cluster, Sweep

__all__ = ["allocate", "open_store", "plan"]


def allocate(
    config: pytest.Config, matrix: Path, pool: tuple[Cluster, ...], run_id: str
) -> tuple[Registry, tuple[Cluster, ...]]:
    """The run's registry, and the pool with the nodes of its slurm clusters (an allocation
    made here lives in the registry, released when it closes: at the end, on a failure, on
    Ctrl-C/SIGTERM/SIGHUP and at interpreter exit)."""
    from pytest_ppsweep.session.xdist import is_worker

    registry = Registry()
    registry.install_atexit()
    try:
        jobid = options.get(config, "ppsweep_slurm_jobid") or ""
        reap = bool(config.getoption("ppsweep_reap")) and not is_worker(config)
        # a SIGTERM while salloc waits ends the run like a Ctrl-C: the request is withdrawn
        with stopping_as_ctrl_c():
            pool = backends.prepare(pool, run_id, registry, jobid, reap)
    except (HostError, ValueError) as exc:
        registry.close()
        registry.remove_atexit()
        raise pytest.UsageError(f"{matrix}: {exc}") from None
    except BaseException:
        registry.close()
        registry.remove_atexit()
        raise
    return registry, pool


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
