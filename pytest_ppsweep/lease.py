"""Several clusters at once under pytest-xdist: the controller's side.

One xdist worker per cluster of the pool. The controller leases a cluster to each worker when
it is configured and takes it back when the worker goes down; :class:`PoolScheduling` gives a
worker only layouts that fit its cluster (one ``xdist_group`` per layout, so a layout is booted
once, by one worker). A worker that crashes runs no finalizers: its ranks are found by the run
id they carry and stopped from here, and the layouts it had not finished are reported as not
run, never silently missing.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadGroupScheduling

from pytest_ppsweep.backends import label_env
from pytest_ppsweep.matrix import Cluster, Sweep


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
    return cfg is None or cfg.pp * cfg.tp == cluster.gpus


_LAYOUT = re.compile(r"\bpp\d+-tp\d+-ep\d+\b")


class PoolScheduling(LoadGroupScheduling):  # type: ignore[misc]
    """loadgroup scheduling that gives each worker only the layouts its cluster can run."""

    collection: list[str] | None

    def __init__(self, config: Any, log: Any, sweep: Sweep, pool: Pool) -> None:
        super().__init__(config, log)
        self._sweep = sweep
        self._pool = pool

    def _split_scope(self, nodeid: str) -> str:
        # The layout id inside the test id is the work unit. xdist's own "@<group>" suffix is
        # not relied on: pytest 9.2 ignores the `_nodeid` that xdist 3.8 rewrites to add it.
        match = _LAYOUT.search(nodeid.rsplit("[", 1)[-1]) if "[" in nodeid else None
        return match.group(0) if match else str(super()._split_scope(nodeid))

    def _cluster(self, node: Any) -> Cluster:
        return self._pool.clusters[node.workerinput["ppsweep_cluster"]]

    def _fitting(self, node: Any) -> str | None:
        cluster = self._cluster(node)
        return next((s for s in self.workqueue if fits(self._sweep, s, cluster)), None)

    def _assign_work_unit(self, node: Any) -> None:
        scope = self._fitting(node)
        if scope is None:
            return
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some(
            [collection.index(nid) for nid, done in work_unit.items() if not done]
        )

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down:
            return
        if self._fitting(node) is None:
            if not self._pending_of(self.assigned_work[node]):
                node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 2:
            return
        self._assign_work_unit(node)

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self._reschedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.registered_collections.values())))
        if not self.collection:
            return
        for nodeid in self.collection:
            self.workqueue.setdefault(self._split_scope(nodeid), {})[nodeid] = False
        for node in self.nodes:
            self._reschedule(node)

    def remove_node(self, node: Any) -> str | None:
        """A crashed worker's unfinished layouts are not run elsewhere: reported as not run."""
        workload = self.assigned_work.pop(node)
        crashed = None
        for scope, unit in workload.items():
            pending = [nid for nid, done in unit.items() if not done]
            if pending:
                crashed = crashed or pending[0]
                self._pool.not_run[scope] = (
                    f"worker {node.gateway.id} on cluster {node.workerinput['ppsweep_cluster']} "
                    f"went down before finishing it ({len(pending)} tests not run)"
                )
        for other in self.assigned_work:
            self._reschedule(other)
        return crashed


def find_local(run_id: str, cluster: str | None = None) -> list[int]:
    """PIDs of local rank processes labelled with ``run_id`` (and ``cluster`` if given)."""
    want = [f"{label_env('ppsweep.run')}={run_id}".encode()]
    if cluster:
        want.append(f"{label_env('ppsweep.cluster')}={cluster}".encode())
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if all(w in environ for w in want):
            pids.append(int(entry.name))
    return pids


def reap_local(run_id: str, cluster: str | None = None) -> list[int]:
    """SIGKILL every local rank of ``run_id`` (and its process group); returns the PIDs."""
    pids = find_local(run_id, cluster)
    for pid in pids:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    return pids
