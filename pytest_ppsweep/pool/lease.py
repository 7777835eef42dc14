"""Several clusters at once under pytest-xdist: the controller's side.

One xdist worker per cluster of the pool. The controller leases a cluster to each worker when
it is configured and takes it back when the worker goes down; :class:`PoolScheduling` gives a
worker only layouts that fit its cluster (one ``xdist_group`` per layout, so a layout is booted
once, by one worker). A worker that crashes runs no finalizers: its ranks are found by the run
id they carry and stopped from here, and the layouts it had not finished are reported as not
run, never silently missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_ppsweep.matrix.model import Cluster, Sweep

# xdist ``workerinput`` keys the controller sets for each worker (spelled here only).
WORKER_CLUSTER = "ppsweep_cluster"  # name of the cluster leased to the worker
WORKER_RUN_ID = "ppsweep_run_id"  # the run folder every worker shares
WORKER_PLAN = "ppsweep_plan"  # the continuity plan, as builtins


@dataclass
class Pool:
    """Clusters of the run and which worker holds which."""

    clusters: dict[str, Cluster]
    leases: dict[str, str] = field(default_factory=dict)  # worker id → cluster name
    not_run: dict[str, str] = field(default_factory=dict)  # config id → why

    def lease(self, worker: str) -> Cluster:
        free = [n for n in self.clusters if n not in self.leases.values()]
        if not free:
            raise RuntimeError(
                f"worker {worker}: every cluster of the pool is leased ({self.leases}); "
                "start at most one worker per cluster"
            )
        self.leases[worker] = free[0]
        return self.clusters[free[0]]

    def release(self, worker: str) -> Cluster | None:
        name = self.leases.pop(worker, None)
        return self.clusters[name] if name else None


def fits(sweep: Sweep, config_id: str, cluster: Cluster) -> bool:
    """Whether a layout (or any non-layout work unit) can run on ``cluster``."""
    cfg = next((c for c in sweep.configs if c.id == config_id), None)
    return cfg is None or cluster.fits(cfg)


