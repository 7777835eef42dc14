"""``kind = "slurm"``: the nodes of the run's allocation (taken by jobid or salloc'd at the
start), one job step per layout (cluster/slurm.py). With ``container_image`` the step runs in
that image through Pyxis (:class:`SlurmPyxisBackend`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_ppsweep.cluster.backend import Backend, NodeCheck
from pytest_ppsweep.cluster.base import CommandHost, HostError, Launcher
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.cluster.slurm import SlurmLauncher, SlurmNodeHost, resolve
from pytest_ppsweep.matrix.model import Cluster, Host, Sweep


class SlurmBackend(Backend):
    kind = "slurm"
    launcher_name = "process"
    nodes_from_allocation = True
    flags_where = "in a step on node 0 of the allocation"

    def host(self, host: Host, registry: Registry | None = None) -> CommandHost:
        # a one-task step on the node, in the run's allocation (cluster/slurm.py)

        return SlurmNodeHost(self.cluster, host)

    def launcher(self, sweep: Sweep | None = None, registry: Registry | None = None) -> Launcher:
        # one job step per layout in the run's allocation (cluster/slurm.py)

        return SlurmLauncher(self.cluster)

    def prepare(self, run_id: str, registry: Registry, jobid: str = "",
                reap: bool = False) -> Cluster:
        return resolve(self.cluster, run_id, registry, jobid, reap)

    def fetch_files(self, host: CommandHost, folder: str, names: Sequence[str],
                    local: Path) -> None:
        fetch_all = getattr(host, "fetch_all", None)
        if fetch_all is None:
            super().fetch_files(host, folder, names, local)
            return
        try:  # all of a node's files read back in one step
            fetch_all(folder, names, local)
        except (OSError, HostError) as exc:
            raise HostError(f"cannot fetch its traces: {exc}") from None

    def node_checks(self, rank0: bool) -> tuple[NodeCheck, ...]:
        return ("module", "paths", "gpus", "ports")


class SlurmPyxisBackend(SlurmBackend):
    """Slurm steps in ``container_image`` through Pyxis."""
    flags_where = ""
    flags_unchecked = ("the server module is in the container image, which only a step opens "
                       "(Pyxis); the preflight checks Pyxis itself, and a flag mistake fails at "
                       "boot")

    def node_checks(self, rank0: bool) -> tuple[NodeCheck, ...]:
        # the module lives in the image, which only a step can open: Pyxis is checked (once,
        # on node 0's line) instead; paths, GPUs and ports as on any node
        return ("pyxis", "paths", "gpus", "ports") if rank0 else ("paths", "gpus", "ports")


def slurm_backend(cluster: Cluster) -> SlurmBackend:
    """Plain steps, or steps in a container image through Pyxis."""
    return SlurmPyxisBackend(cluster) if cluster.container_image else SlurmBackend(cluster)
