"""``kind = "slurm"``: the nodes of the run's allocation (taken by jobid or salloc'd at the
start), one job step per layout (cluster/slurm.py). With ``container_image`` the step runs in
that image through Pyxis (:class:`SlurmPyxisBackend`)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path

from pytest_ppsweep.cluster.backend import Backend, NodeCheck
from pytest_ppsweep.cluster.base import CommandHost, CommandResult, HostError, Launcher
from pytest_ppsweep.cluster.rankspec import with_env
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.cluster.slurm import (
    SlurmLauncher,
    SlurmNodeHost,
    before_layout,
    image_file,
    job_name,
    resolve,
    resources,
    salloc_argv,
    srun_step_argv,
    with_allocation,
)
from pytest_ppsweep.matrix.model import Cluster, Host, Sweep
from pytest_ppsweep.matrix.slurmsettings import SlurmSettings
from pytest_ppsweep.redact import redact_argv

RUN_ID_PLACEHOLDER = "<run-id>"
JOBID_PLACEHOLDER = "<jobid>"
_RUN_SENTINEL = "RUNIDSENTINEL"


def _placeholder_run(name: str) -> str:
    """A job or step name (cluster/slurm.job_name's) with the run id shown as a placeholder."""
    return name.replace(_RUN_SENTINEL, RUN_ID_PLACEHOLDER, 1)


class SlurmBackend(Backend):
    kind = "slurm"
    launcher_name = "process"
    flags_where = "in a step on node 0 of the allocation"

    def host(self, host: Host, registry: Registry | None = None) -> CommandHost:
        # a one-task step on the node, in the run's allocation (cluster/slurm.py)

        return SlurmNodeHost(self.cluster, host)

    def launcher(self, sweep: Sweep | None = None, registry: Registry | None = None) -> Launcher:
        # one job step per layout in the run's allocation (cluster/slurm.py)

        return SlurmLauncher(self.cluster, registry)

    @classmethod
    def for_cluster(cls, cluster: Cluster) -> Backend:
        """Plain steps, or steps in a container image through Pyxis."""
        if SlurmSettings.of(cluster).container_image:
            return SlurmPyxisBackend(cluster)
        return cls(cluster)

    @property
    def own(self) -> SlurmSettings:
        """The cluster's Slurm settings (its keys only a slurm cluster takes)."""
        return SlurmSettings.of(self.cluster)

    def prepare(self, run_id: str, registry: Registry, jobid: str = "",
                reap: bool = False) -> Cluster:
        return resolve(self.cluster, run_id, registry, jobid, reap)

    def allocation(self) -> str:
        return self.own.jobid

    def with_allocation(self, jobid: str) -> Cluster:
        return with_allocation(self.cluster, jobid)

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

    def dry_run_lines(self, sweep: Sweep) -> list[str]:
        """Where the Slurm commands run, and the allocation: the run's ``salloc`` line (the
        run id and the granted job id are placeholders), or the job it takes."""
        c, own = self.cluster, self.own
        where = (f"on login node {own.login} over SSH" if own.login
                 else "on this machine")
        lines = [f"Slurm commands run {where}"]
        if own.jobid:
            lines.append(f"allocation: job {own.jobid} is taken as it is (no salloc); its "
                         "nodes replace node0… below")
        else:
            name = _placeholder_run(job_name(_RUN_SENTINEL, c.name))
            argv = salloc_argv(c, name, f"ppsweep run {RUN_ID_PLACEHOLDER}")
            lines.append(f"allocation: {shlex.join(redact_argv(argv))}")
            lines.append(f"  (held until the run ends; its {len(c.hosts)} nodes replace "
                         f"node0…node{len(c.hosts) - 1} below, its job id {JOBID_PLACEHOLDER})")
        lines += self._image_lines()
        return lines

    def _image_lines(self) -> list[str]:
        return []

    def dry_run_point_lines(self, config_id: str, nodes: Sequence[str]) -> list[str]:
        """The point's one step: its ``srun`` line (each task runs the node line of its
        ``SLURM_NODEID``, given to it in the step's environment, never on the command line)."""
        c = self.cluster
        jobbed = c if self.own.jobid else with_allocation(c, JOBID_PLACEHOLDER)
        name = _placeholder_run(job_name(_RUN_SENTINEL, config_id, "RANDOM")).replace(
            "RANDOM", "<random>")
        argv = redact_argv(srun_step_argv(jobbed, name, nodes))
        return [f"  step: {shlex.join(argv)}",
                "    (task k runs node k's line below, with its environment)"]

    def resources(self, sweep: Sweep, registry: Registry, smi: Callable[[str], list[str]]
                  ) -> tuple[list[str], list[str]]:
        # what each rank gets on each node of the allocation, against what the keys ask
        return resources(self.cluster, smi)

    def before_layout(self, eta_s: float | None, run_id: str, registry: Registry,
                      say: Callable[[str], None]) -> Cluster:
        # the allocation's time left vs the layout's ETA, its nodes still up; else renewed
        # (without the failed nodes) or ClusterStop (on_limit)
        return before_layout(self.cluster, eta_s, run_id, registry, say)


class SlurmPyxisBackend(SlurmBackend):
    """Slurm steps in ``container_image`` through Pyxis."""

    flags_where = "in the container image, in a step on node 0 of the allocation (Pyxis)"

    def engine_id(self, sweep: Sweep) -> Hashable:
        return ("pyxis", self.own.container_image)

    def engine_where(self, sweep: Sweep) -> str:
        host = self.cluster.rank0()
        return (f"in container image {self.own.container_image} on node 0 {host.name} "
                f"({host.address}), a Slurm step through Pyxis")

    def run_engine(self, sweep: Sweep, argv: Sequence[str], env: Mapping[str, str],
                   registry: Registry, timeout: float, node: Host | None = None
                   ) -> CommandResult:
        step = SlurmNodeHost(self.cluster, node or self.cluster.rank0(), in_image=True)
        return step.run(with_env(env, argv), timeout)

    def _image_lines(self) -> list[str]:
        c = self.cluster
        mounts = f", mounts {', '.join(c.mounts)}" if c.mounts else ""
        return [f"Pyxis: each step runs in image {self.own.container_image}{mounts} (srun "
                "--container-image); the preflight checks that srun --help offers "
                f"--container-image and imports the image once per node into {image_file(c)}"]

    def node_checks(self, rank0: bool) -> tuple[NodeCheck, ...]:
        # the module lives in the image, which only a step opens: Pyxis is checked, the image
        # imported on each node once (a squashfs the steps name: pyxis_image), then the server's
        # parser runs in the image (once, on node 0); paths, GPUs and ports as on any node
        if rank0:
            return ("pyxis", "pyxis_image", "flags", "paths", "gpus", "ports")
        return ("pyxis_image", "paths", "gpus", "ports")

