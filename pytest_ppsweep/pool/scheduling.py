"""The xdist controller's scheduler (the only module that imports xdist): layouts go only to
workers whose leased cluster fits them, following the makespan plan of :mod:`.balance`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, cast

from xdist.scheduler import LoadGroupScheduling

from pytest_ppsweep.matrix.model import Cluster, Sweep, boot_groups
from pytest_ppsweep.pool.balance import Estimates, partition
from pytest_ppsweep.pool.lease import WORKER_CLUSTER, Pool, fits

_LAYOUT = re.compile(r"\bpp\d+-tp\d+-ep\d+\b")


class PoolScheduling(LoadGroupScheduling):  # type: ignore[misc]
    """loadgroup scheduling that gives each worker only the layouts its cluster can run.

    When every worker is up, the layouts are planned over them from their expected durations
    (:func:`pytest_ppsweep.pool.balance.partition`); a worker runs its own plan longest first. A
    worker whose plan is done takes a layout that another worker has planned but not started
    (the one that best halves that worker's remaining time): on clusters of one kind that
    layout can only start sooner, so a wrong estimate costs less than a fixed plan would.
    """

    collection: list[str] | None

    def __init__(
        self,
        config: Any,
        log: Any,
        sweep: Sweep,
        pool: Pool,
        expected: Estimates | None = None,
        note: Callable[[str], None] = lambda _m: None,
    ) -> None:
        super().__init__(config, log)
        self._sweep = sweep
        self._pool = pool
        self._expected = dict(expected.seconds) if expected else {}
        self._timed = bool(expected and expected.measured)
        self._note = note
        self._owner: dict[str, str] = {}  # work unit → worker id it is planned for
        self._rank: dict[str, int] = {}  # work unit → its place in its worker's plan
        self._started: dict[str, float] = {}  # work unit → monotonic time it was handed out
        # A work unit is a server configuration (one boot): the points that differ only in
        # their workload go to one worker together, named by their first point's id.
        self._unit = boot_groups(sweep.configs)
        self._members: dict[str, list[str]] = {}
        for cid, unit in self._unit.items():
            self._members.setdefault(unit, []).append(cid)

    def _split_scope(self, nodeid: str) -> str:
        # The point id inside the test id is the work unit. xdist's own "@<group>" suffix is
        # not relied on: pytest 9.2 ignores the `_nodeid` that xdist 3.8 rewrites to add it.
        # Matched against the sweep's known ids (axis points: pp8-tp4-ep4-a2a_deepep), the
        # longest first, as session.collection.points_from_ids does.
        if "[" in nodeid:
            param = nodeid.rsplit("[", 1)[-1].split("]", 1)[0]
            for cid in self._known:
                if param == cid or param.startswith(cid + "-"):
                    return self._unit.get(cid, cid)
        match = _LAYOUT.search(nodeid.rsplit("[", 1)[-1]) if "[" in nodeid else None
        return match.group(0) if match else str(super()._split_scope(nodeid))

    def _point_of(self, nodeid: str, scope: str) -> str:
        """The point of work unit ``scope`` that test ``nodeid`` belongs to."""
        param = nodeid.rsplit("[", 1)[-1].split("]", 1)[0] if "[" in nodeid else ""
        members = sorted(self._members.get(scope, [scope]), key=len, reverse=True)
        return next((m for m in members if param == m or param.startswith(m + "-")), scope)

    @property
    def _known(self) -> list[str]:
        return sorted((c.id for c in self._sweep.configs), key=len, reverse=True)

    def _is_layout(self, scope: str) -> bool:
        return any(c.id == scope for c in self._sweep.configs) or bool(_LAYOUT.fullmatch(scope))

    def _cluster(self, node: Any) -> Cluster:
        return self._pool.clusters[node.workerinput[WORKER_CLUSTER]]

    def _cost(self, scope: str) -> float:
        # Without estimates every layout weighs the same; other work units (tests outside any
        # layout) weigh nothing.
        if not self._is_layout(scope):
            return self._expected.get(scope, 0.0)
        return sum(self._expected.get(m, 1.0) for m in self._members.get(scope, [scope]))

    def _remaining(self, worker: str) -> float:
        """Expected seconds until ``worker`` is through its plan (0 if it is gone)."""
        node = next((n for n in self.assigned_work if n.gateway.id == worker), None)
        if node is None:
            return 0.0
        now = time.monotonic()
        running = sum(
            max(self._cost(s) - (now - self._started.get(s, now)), 0.0)
            for s, unit in self.assigned_work[node].items()
            if not all(unit.values())
        )
        queued = sum(self._cost(s) for s in self.workqueue if self._owner.get(s) == worker)
        return running + queued

    def _idle(self, node: Any) -> bool:
        # An xdist worker runs a test only once it knows the next one (or is told to stop), so
        # a worker with one pending test is waiting for work, not running it.
        return bool(self._pending_of(self.assigned_work[node]) <= 1)

    def _fitting(self, node: Any) -> str | None:
        cluster = self._cluster(node)
        fitting: list[str] = [s for s in self.workqueue if fits(self._sweep, s, cluster)]
        if not fitting:
            return None
        me = node.gateway.id
        own = [s for s in fitting if self._owner.get(s, me) == me]
        if own:  # in plan order: longest first
            return min(own, key=lambda s: self._rank.get(s, 0))
        if not self._idle(node):
            return None  # take over another worker's unit only when idle
        busy = {n.gateway.id for n in self.assigned_work if not self._idle(n)}
        live = {n.gateway.id for n in self.assigned_work}
        orphan = [s for s in fitting if self._owner[s] not in live]
        if orphan:
            return orphan[0]
        # An idle owner takes its own unit itself; only a busy owner's are taken over.
        fitting = [s for s in fitting if self._owner[s] in busy]
        if not fitting:
            return None

        def after(scope: str) -> float:
            # Expected end of the owner's plan if this worker takes ``scope`` now.
            rest = self._remaining(self._owner[scope])
            return max(self._cost(scope), rest - self._cost(scope))

        # Ties: the unit the owner would have started last.
        scope = min(fitting, key=lambda s: (after(s), -self._rank.get(s, 0), s))
        self._note(f"{me} takes {scope} over from {self._owner[scope]} (idle, not started there)")
        return scope

    def _plan(self) -> None:
        workers = {n.gateway.id: self._cluster(n).gpus for n in self.nodes}
        clusters = {n.gateway.id: self._cluster(n).name for n in self.nodes}
        # Workers of one size are alike to the planner; one cluster of each size stands for it.
        sized = {self._cluster(n).gpus: self._cluster(n) for n in self.nodes}
        plan = partition(
            {s: self._cost(s) for s in self.workqueue},
            workers,
            lambda s, gpus: fits(self._sweep, s, sized[cast(int, gpus)]),
        )
        for worker, scopes in plan.items():
            self._owner.update(dict.fromkeys(scopes, worker))
            self._rank.update({s: i for i, s in enumerate(scopes)})
            layouts = [s for s in scopes if self._is_layout(s)]
            if self._timed:
                total = sum(self._cost(s) for s in layouts)
                shown = ", ".join(f"{s} ~{self._cost(s):.0f} s" for s in layouts)
                shown = f"{shown}; ~{total:.0f} s" if layouts else "nothing"
            else:
                shown = ", ".join(layouts) or "nothing"
            self._note(f"plan {worker} ({clusters[worker]}): {shown}")

    def _assign_work_unit(self, node: Any) -> None:
        scope = self._fitting(node)
        if scope is None:
            return
        work_unit = self.workqueue.pop(scope)
        self._started[scope] = time.monotonic()
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some(
            [collection.index(nid) for nid, done in work_unit.items() if not done]
        )

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        super().mark_test_complete(node, item_index, duration)
        # An idle worker gets no events of its own: let it take over work now that it may.
        for other in self.nodes:
            if other is not node and self._idle(other):
                self._reschedule(other)

    def _drop_unrunnable(self) -> None:
        """Layouts that no live worker's cluster fits (the only one that did went down) are
        reported as not run, so the run ends instead of waiting for them."""
        live = [self._cluster(n) for n in self.assigned_work if not n.shutting_down]
        for scope in [s for s in self.workqueue
                      if not any(fits(self._sweep, s, c) for c in live)]:
            unit = self.workqueue.pop(scope)
            cfg = self._sweep.config(scope)
            for cid in self._members.get(scope, [scope]):
                self._pool.not_run[cid] = (
                    f"it needs {cfg.gpus} GPUs and no worker with a cluster that size is left "
                    f"in the pool ({len(unit)} tests not run)"
                )

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down:
            return
        pending = self._pending_of(self.assigned_work[node])
        if not any(fits(self._sweep, s, self._cluster(node)) for s in self.workqueue):
            if pending <= 1:  # one held test: the worker runs it once told to stop
                node.shutdown()
                self._drop_unrunnable()
            return
        if pending > 2:
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
        self._plan()
        for node in self.nodes:
            self._reschedule(node)

    def remove_node(self, node: Any) -> str | None:
        """A crashed worker's unfinished layouts are not run elsewhere: reported as not run.

        Layouts it had been planned but not yet given are taken by the other workers.
        """
        workload = self.assigned_work.pop(node)
        crashed = None
        for scope, unit in workload.items():
            pending = [nid for nid, done in unit.items() if not done]
            if pending:
                crashed = crashed or pending[0]
                for cid in {self._point_of(nid, scope) for nid in pending}:
                    self._pool.not_run[cid] = (
                        f"worker {node.gateway.id} on cluster "
                        f"{node.workerinput[WORKER_CLUSTER]} went down before finishing it "
                        f"({len(pending)} tests not run)"
                    )
        # What only its cluster fits waits: xdist may start a replacement worker, which
        # leases the same cluster; the others drop it as not run once they are through.
        for other in self.assigned_work:
            self._reschedule(other)
        return crashed
