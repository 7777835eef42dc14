"""pytest-xdist: one worker per cluster of the pool. The controller leases each worker a
cluster, plans the layouts from earlier runs' durations and reaps a crashed worker's ranks; the
checks of ``-n`` and ``--dist`` run at set-up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep.pool.balance import expected_durations
from pytest_ppsweep.pool.lease import WORKER_CLUSTER, WORKER_PLAN, WORKER_RUN_ID, Pool

if TYPE_CHECKING:
    from pytest_ppsweep import continuity
    from pytest_ppsweep.matrix.model import Cluster
    from pytest_ppsweep.pool.lease import Pool
    from pytest_ppsweep.run.context import RunContext
    from pytest_ppsweep.session.progress import Progress

__all__ = ["Xdist", "check_workers", "is_worker"]


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def check_workers(config: pytest.Config, pool: tuple[Cluster, ...]) -> None:
    """xdist: at most one worker per cluster, and loadgroup scheduling (one boot per layout)."""
    n = getattr(config.option, "numprocesses", None)
    if not n:
        return
    names = ", ".join(c.name for c in pool)
    if int(n) > len(pool):
        raise pytest.UsageError(
            f"-n {n}: the cluster pool has {len(pool)} cluster(s) ({names}) and each worker needs "
            f"one of its own (two workers must never boot two layouts on the same nodes); use "
            f"-n {len(pool)} or -n auto, or add clusters with --ppsweep-cluster a,b"
        )
    explicit = any(a == "-d" or a.startswith("--dist") for a in config.invocation_params.args)
    dist = getattr(config.option, "dist", "no")
    if explicit and dist != "loadgroup":
        raise pytest.UsageError(
            f"--dist {dist}: a sweep needs --dist loadgroup (each layout is one xdist_group, "
            "booted once on one worker)"
        )
    config.option.dist = "loadgroup"


class Xdist:
    """The xdist controller's side of the session."""
    def __init__(self, config: pytest.Config, ctx: RunContext, ids: list[str],
                 plan: continuity.Plan, progress: Progress) -> None:
        self.config = config
        self.ctx = ctx
        self.ids = ids
        self.plan = plan
        self.progress = progress
        self.leases: Pool | None = None  # which worker holds which cluster

    @property
    def not_run(self) -> dict[str, str]:
        """The layouts no worker could run (none fitted its cluster), and why."""
        return dict(self.leases.not_run) if self.leases else {}

    def lease_pool(self) -> Pool:
        if self.leases is None:
            self.leases = Pool({c.name: c for c in self.ctx.clusters.all})
        return self.leases

    def scheduler(self, log: Any) -> Any:
        """One worker per cluster: layouts go only to workers whose cluster fits them, planned
        from the durations an earlier run of the sweep measured."""
        from pytest_ppsweep.pool.scheduling import PoolScheduling

        expected = expected_durations(
            self.ctx.store.dir.parent,
            self.ctx.sweep.name,
            self.ids,
            self.ctx.store.run_id,
            skipped=self.plan.skip_configs,  # reused or finished before a resume
        )
        self.progress(f"pool plan: {expected.describe()}")
        return PoolScheduling(
            self.config, log, self.ctx.sweep, self.lease_pool(), expected, self.progress
        )

    def configure_node(self, node: Any) -> None:
        """Lease a cluster to the worker; it writes into this run folder, and its progress
        lines there are shown on this terminal."""
        self.progress.follow_workers()
        cluster = self.lease_pool().lease(node.gateway.id)
        node.workerinput[WORKER_CLUSTER] = cluster.name
        node.workerinput[WORKER_RUN_ID] = self.ctx.store.run_id
        node.workerinput[WORKER_PLAN] = self.plan.as_builtin()

    def node_down(self, node: Any, error: Any) -> None:
        """The cluster returns to the pool; a crashed worker's ranks are reaped."""
        cluster = self.lease_pool().release(node.gateway.id)
        if error and cluster is not None:
            from pytest_ppsweep.cluster.reap import reap_local

            pids = reap_local(self.ctx.store.run_id, cluster.name)
            self.progress(
                f"worker {node.gateway.id} crashed; cluster {cluster.name} back in the pool; "
                f"stopped {len(pids)} leftover rank process(es)"
            )
