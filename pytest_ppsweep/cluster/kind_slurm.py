"""``kind = "slurm"``: the nodes of the run's allocation (taken by jobid or salloc'd at the
start), one job step per layout (cluster/slurm.py). With ``container_image`` the step runs in
that image through Pyxis (:class:`SlurmPyxisBackend`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path

from pytest_ppsweep.cluster.backend import Backend, NodeCheck
from pytest_ppsweep.cluster.base import CommandHost, CommandResult, HostError, Launcher
from pytest_ppsweep.cluster.rankspec import with_env
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.cluster.slurm import SlurmLauncher, SlurmNodeHost, resolve
from pytest_ppsweep.matrix.model import Cluster, Host, Sweep


class SlurmBackend(Backend):
    kind = "slurm"
    launcher_name = "process"
    nodes_from_allocation = True
    flags_where = "in a step on node 0 of the allocation"
    dry_run_flags_unavailable = ("a step needs the run's allocation, and the dry run asks Slurm "
                                 "for nothing")

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
        if rank0:  # the server's own parser, once, in a step on node 0 (run_engine)
            return ("module", "flags", "paths", "gpus", "ports")
        return ("module", "paths", "gpus", "ports")


class SlurmPyxisBackend(SlurmBackend):
    """Slurm steps in ``container_image`` through Pyxis."""

    flags_where = "in the container image, in a step on node 0 of the allocation (Pyxis)"

    def engine_id(self, sweep: Sweep) -> Hashable:
        return ("pyxis", self.cluster.container_image)

    def engine_where(self, sweep: Sweep) -> str:
        host = self.cluster.rank0()
        return (f"in container image {self.cluster.container_image} on node 0 {host.name} "
                f"({host.address}), a Slurm step through Pyxis")

    def run_engine(self, sweep: Sweep, argv: Sequence[str], env: Mapping[str, str],
                   registry: Registry, timeout: float, node: Host | None = None
                   ) -> CommandResult:
        step = SlurmNodeHost(self.cluster, node or self.cluster.rank0(), in_image=True)
        return step.run(with_env(env, argv), timeout)

    def node_checks(self, rank0: bool) -> tuple[NodeCheck, ...]:
        # the module lives in the image, which only a step opens: Pyxis is checked, then the
        # server's parser runs in the image (once, on node 0); paths, GPUs and ports as on any
        # node
        if rank0:
            return ("pyxis", "flags", "paths", "gpus", "ports")
        return ("paths", "gpus", "ports")


def slurm_backend(cluster: Cluster) -> SlurmBackend:
    """Plain steps, or steps in a container image through Pyxis."""
    return SlurmPyxisBackend(cluster) if cluster.container_image else SlurmBackend(cluster)
