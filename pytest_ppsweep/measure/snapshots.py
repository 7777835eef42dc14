"""GPU memory snapshots of a cluster and their cache: nvidia-smi on every node at once, written
to ``gpu/<config>/<moment>.csv``, and reused for the next moment when nothing that changes the
GPUs ran in between (a boot, a round, a stop)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from pytest_ppsweep.cluster.gpus import GpuMemory
from pytest_ppsweep.cluster.nodeinfo import query_gpus
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.model import Cluster
from pytest_ppsweep.measure.phases import PhaseClock

__all__ = ["REUSE_SNAPSHOT_S", "GpuSnapshots"]

# A GPU snapshot this recent stands for the next moment when nothing ran in between (unchanged).
REUSE_SNAPSHOT_S = 60.0


class GpuSnapshots:
    """The GPU snapshots of one run: each written to the run folder, its time in the layout's
    ``snapshots`` phase, and each cluster's newest one kept until something changes its GPUs."""

    def __init__(self, store: RunStore, phases: PhaseClock, registry: Registry) -> None:
        self.store = store
        self.phases = phases
        self.registry = registry
        # cluster name → (config id, moment, GPUs, when) of its newest snapshot, until a boot, a
        # round or a stop may have changed its GPUs (unchanged/changed)
        self._latest: dict[str, tuple[str, str, list[GpuMemory], float]] = {}

    def take(self, cluster: Cluster, config_id: str, moment: str) -> list[GpuMemory]:
        """nvidia-smi on every node at once; written to ``gpu/<config>/<moment>.csv``.

        A cluster whose ``nvidia_smi`` is empty has no GPUs to read (a CPU cluster): [].
        """
        if not cluster.nvidia_smi:
            return []
        with self.phases.timed(config_id, "snapshots"):
            gpus = self.unchanged(cluster, config_id, moment)
            if gpus is None:
                gpus = query_gpus(cluster, self.registry)
            self._latest[cluster.name] = (config_id, moment, gpus, time.monotonic())
            lines = ["node,index,name,memory_used_mib,memory_total_mib"] + [
                f"{g.node},{g.index},{g.name},{g.used_mib},{g.total_mib}" for g in gpus
            ]
            self.store.gpu_path(config_id, moment).write_text("\n".join(lines) + "\n")
            return gpus

    def aside(self, cluster: Cluster, config_id: str, moment: str) -> Future[list[GpuMemory]]:
        """:meth:`take` in a thread of its own, for a moment whose GPUs nobody reads at
        once (``healthy``): the caller does its own work meanwhile (the nvidia-smi process runs
        on another core; on the emulator it is an interpreter's start) and waits for the result
        before anything may change the GPUs."""
        future: Future[list[GpuMemory]] = Future()

        def snapshot() -> None:
            try:
                future.set_result(self.take(cluster, config_id, moment))
            except BaseException as exc:  # raised where the caller waits
                future.set_exception(exc)

        threading.Thread(target=snapshot, name=f"ppsweep-smi-{config_id}", daemon=True).start()
        return future

    def unchanged(self, cluster: Cluster, config_id: str, moment: str) -> list[GpuMemory] | None:
        """The cluster's newest snapshot when it stands for ``moment`` too, else None: it is
        less than ``REUSE_SNAPSHOT_S`` old, nothing that changes the GPUs (a boot, a round, a
        stop: :meth:`changed`) ran since, and it was this layout's "after" (the plugin's
        teardown right after test_gpu_memory) or a layout's "cleaned" (the next layout's
        "before"). Each nvidia-smi costs a process per node, an interpreter on the emulator."""
        latest = self._latest.get(cluster.name)
        if latest is None or time.monotonic() - latest[3] > REUSE_SNAPSHOT_S:
            return None
        taken_for, taken_at, gpus, _when = latest
        if (moment == "after" and taken_at == "after" and taken_for == config_id) or (
            moment == "before" and taken_at == "cleaned"
        ):
            return gpus
        return None

    def changed(self, cluster: Cluster) -> None:
        """Something may have changed the cluster's GPU memory: snapshot it again."""
        self._latest.pop(cluster.name, None)
