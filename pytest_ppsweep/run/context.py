"""What every step of a run shares, built once (by :class:`~pytest_ppsweep.run.sweeprun.SweepRun`)
and handed to each step (lifecycle, boots, rounds, profile_step, comm_step, slo_search,
adaptive) instead of their positional wiring: the sweep, the clusters this process may boot on,
the run folder, the registry of live ranks and connections, the progress lines and the live
status, where each layout's time goes, its GPU snapshots and the run's workloads.

The value is frozen. Three of its members hold what the run learns as it goes, each the one home
of its fact: :class:`Clusters` (the pool's nodes, known once a slurm allocation is made),
:class:`ClusterTime` (the cluster time each layout used), and the phase clock and snapshots of
``measure/``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.folder.runfolder import LiveRecord, RunStore
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep, cluster_for
from pytest_ppsweep.measure.phases import PhaseClock
from pytest_ppsweep.measure.snapshots import GpuSnapshots
from pytest_ppsweep.run.live import LiveStatus, NoStatus, Recorded
from pytest_ppsweep.run.workloads import Workloads

__all__ = ["ClusterTime", "Clusters", "RunContext"]


class Clusters:
    """The clusters this process may boot on: the pool, or under xdist the leased one. A slurm
    cluster's nodes are known once its allocation is made, after the run was set up
    (session/setup.Nodes): :meth:`use` then puts them in; a new allocation made before a layout
    (its time or a node ran out) puts its own in with :meth:`replace`."""

    def __init__(self, clusters: Iterable[Cluster]) -> None:
        self._clusters = tuple(clusters)
        self._watchers: list[Callable[[Cluster], None]] = []

    @property
    def all(self) -> tuple[Cluster, ...]:
        return self._clusters

    def use(self, clusters: Iterable[Cluster]) -> None:
        """The clusters once their nodes are known."""
        self._clusters = tuple(clusters)

    def replace(self, cluster: Cluster) -> None:
        """``cluster`` instead of the one of its name (a slurm cluster on a new allocation's
        nodes, ``Backend.before_layout``); each watcher is told (the run's claim moves with the
        nodes: session/claims.py), and may raise ClusterStop."""
        self._clusters = tuple(cluster if c.name == cluster.name else c for c in self._clusters)
        for watcher in self._watchers:
            watcher(cluster)

    def watch(self, watcher: Callable[[Cluster], None]) -> None:
        """Call ``watcher(cluster)`` whenever :meth:`replace` puts a cluster on new nodes."""
        self._watchers.append(watcher)

    def first(self) -> Cluster:
        """The first (under xdist: the only) cluster of this process."""
        return self._clusters[0]

    def cluster_for(self, config: Config) -> Cluster:
        """The first cluster that fits the layout (``matrix.model.cluster_for``)."""
        return cluster_for(self._clusters, config)


class ClusterTime:
    """The cluster time each layout used so far: its boot, its tests and its teardown, without
    the waits between them (configs.csv ``held_s``, written by the lifecycle)."""

    def __init__(self) -> None:
        self._busy: dict[str, float] = {}

    def worked(self, config_id: str, seconds: float) -> None:
        """A step (or a test) of ``config_id`` used its service for ``seconds``."""
        self._busy[config_id] = self._busy.get(config_id, 0.0) + seconds

    def of(self, config_id: str) -> float:
        return self._busy.get(config_id, 0.0)


@dataclass(frozen=True)
class RunContext:
    """The collaborators every run/ step shares (this module's docstring)."""

    sweep: Sweep
    clusters: Clusters
    store: RunStore
    registry: Registry
    progress: Callable[[str], None]
    live: LiveStatus
    phases: PhaseClock
    snapshots: GpuSnapshots
    workloads: Workloads
    cluster_time: ClusterTime = field(default_factory=ClusterTime)

    @classmethod
    def build(
        cls,
        sweep: Sweep,
        clusters: Iterable[Cluster],
        store: RunStore,
        registry: Registry,
        progress: Callable[[str], None] = lambda _m: None,
        live: LiveStatus | None = None,
    ) -> RunContext:
        """The context of one run: its phase clock, snapshots and workloads made here."""
        phases = PhaseClock()  # where each layout's cluster time goes (metadata/phases.json)
        return cls(
            sweep=sweep,
            clusters=Clusters(clusters),
            store=store,
            registry=registry,
            progress=progress,
            # what each layout is doing, also in the run folder (show reads it while it runs)
            live=Recorded(live if live is not None else NoStatus(),
                          LiveRecord(store, socket.gethostname())),
            phases=phases,
            snapshots=GpuSnapshots(store, phases, registry),
            workloads=Workloads(sweep),
        )
