"""Run set-up before the first test (controller, and the worker's view of it): the run folder
(new, the controller's, or a resumed one), the slurm clusters' allocations and the reuse/resume
plan. Options are read by
:mod:`.options`; this module only acts on them.

When the allocation is made (:class:`Nodes`): a slurm allocation holds nodes of a shared
cluster, so it is asked for only once the run is known to use them. The controller allocates
once the selection holds a point (after collection; under xdist after the first worker's
collection, before any test is scheduled), never for an empty selection, --collect-only or a
dry run. Only a run whose set-up compares the layouts' manifests, which name the nodes, before
collection (--ppsweep-resume, --ppsweep-reuse, --ppsweep-baseline-from: the plan skips tests as
they are collected) allocates at configure. A worker takes the controller's allocation, read
from run.json (``slurm_jobs``), at its first test: it never asks for one of its own."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_ppsweep import continuity
from pytest_ppsweep.cluster import backends
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.folder.runfolder import RUN_JSON, SLURM_JOBS, RunJson, RunStore, new_run_id
from pytest_ppsweep.session import options
from pytest_ppsweep.session.runstate import RunState
from pytest_ppsweep.session.signals import stopping_as_ctrl_c
from pytest_ppsweep.session.xdist import is_worker

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Cluster, Sweep
    from pytest_ppsweep.run.context import RunContext

__all__ = ["Nodes", "allocate", "nodes_needed_at_start", "open_store", "plan", "record_nodes"]


def nodes_needed_at_start(config: pytest.Config) -> bool:
    """The set-up itself needs the nodes: a resume, a reuse or --ppsweep-baseline-from compare
    manifests, which name the nodes, before collection."""
    return any(options.get(config, key) for key in (
        "ppsweep_resume", "ppsweep_reuse", "ppsweep_baseline_from"))


def record_nodes(store: RunStore, pool: tuple[Cluster, ...]) -> None:
    """run.json: the pool's nodes, and each slurm cluster's allocation (its workers take it)."""
    RunJson(store).nodes([h.address for c in pool for h in c.hosts],
                         {c.name: backends.backend_of(c).allocation() for c in pool
                          if backends.backend_of(c).nodes_from_allocation})


def allocate(
    config: pytest.Config, matrix: Path, pool: tuple[Cluster, ...], run_id: str,
    registry: Registry, taken: dict[str, str] | None = None,
) -> tuple[Cluster, ...]:
    """The pool with the nodes of its slurm clusters (an allocation made here lives in
    ``registry``, released when it closes: at the end, on a failure, on Ctrl-C/SIGTERM/SIGHUP
    and at interpreter exit). ``taken``: a worker's, the controller's allocation of each slurm
    cluster (run.json); a worker never asks for one of its own."""
    registry.install_atexit()
    try:
        jobid = options.get(config, "ppsweep_slurm_jobid") or ""
        reap = bool(config.getoption("ppsweep_reap")) and not is_worker(config)
        if taken is not None:
            missing = [c.name for c in pool if backends.backend_of(c).nodes_from_allocation
                       and not (
                jobid or backends.backend_of(c).allocation() or taken.get(c.name))]
            if missing:
                raise ValueError(f"expected the controller's allocation of slurm cluster(s) "
                                 f"{', '.join(missing)} in run.json ({SLURM_JOBS}), found none")
            pool = tuple(_taking(c, taken) if not jobid else c for c in pool)
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
    return pool


def _taking(cluster: Cluster, taken: dict[str, str]) -> Cluster:
    """``cluster`` taking its controller's allocation (``taken``: run.json's), unless its own
    ``jobid`` names one; a cluster whose nodes are not an allocation's as it is."""
    backend = backends.backend_of(cluster)
    if not backend.nodes_from_allocation:
        return cluster
    return backend.with_allocation(backend.allocation() or taken[cluster.name])


class Nodes:
    """The session's allocation of its slurm clusters, made when the run is known to use them
    (this module's docstring)."""
    def __init__(self, config: pytest.Config, matrix: Path, ctx: RunContext,
                 state: RunState) -> None:
        self.config = config
        self.matrix = matrix
        self.ctx = ctx
        self.state = state

    def allocate(self) -> None:
        """Once: the pool's slurm clusters with their allocation's nodes (the controller's
        made now and recorded in run.json; a worker's taken from there)."""
        if self.state.nodes_known:
            return
        store = self.ctx.store
        taken: dict[str, str] | None = None
        if self.state.worker:
            taken = RunJson(store).slurm_jobs()
        pool = allocate(self.config, self.matrix, self.ctx.clusters.all, store.run_id,
                        self.ctx.registry, taken)
        self.state.allocated()
        self.ctx.clusters.use(pool)
        if not self.state.worker:
            record_nodes(store, pool)


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


def resumed_folder(config: pytest.Config) -> Path | None:
    """The run folder ``--ppsweep-resume`` names (None without it); a usage error when it
    holds no run: also in a dry run, which plans the resume."""
    resumed = options.get(config, "ppsweep_resume")
    if not resumed:
        return None
    folder = options.path_arg(config, resumed)
    if not folder.is_dir():
        folder = options.reports_root(config) / resumed
    if not (folder / RUN_JSON).is_file():
        raise pytest.UsageError(
            f"--ppsweep-resume {resumed}: expected a run folder with metadata/run.json, "
            f"found none at {folder}"
        )
    return folder


def open_store(config: pytest.Config, sweep: Sweep, run_id: str | None) -> tuple[RunStore, bool]:
    """The run folder: a new one, the controller's (xdist workers), or a resumed one; and
    whether it was made now (it did not exist before)."""
    resumed = options.get(config, "ppsweep_resume")
    if resumed and not run_id:
        folder = resumed_folder(config)
        assert folder is not None
        return RunStore(folder.parent, folder.name), False
    if resumed and run_id:
        folder = options.path_arg(config, resumed)
        root = folder.parent if folder.is_dir() else options.reports_root(config)
    else:
        root = options.reports_root(config)
    rid = run_id or options.get(config, "ppsweep_run_id") or new_run_id(sweep.name)
    made = not (root / rid).exists()
    return RunStore(root, rid), made
