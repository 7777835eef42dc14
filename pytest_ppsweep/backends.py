"""Which host and launcher a cluster uses: the one place that maps ``kind``/``launcher`` to code.

Every backend offers the same small surface, so launch.py and sweeprun.py never branch on the
cluster kind:

* a *host* runs short commands: ``run(argv, timeout) -> CommandResult`` (nvidia-smi, preflight);
* a *launcher* starts one rank per node and returns a handle with ``poll()`` and ``stop()``; the
  rank's output must end up in the local ``log_path`` while it runs (remote launchers stream it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_ppsweep.hosts import CommandResult, LocalHost
from pytest_ppsweep.matrix import Cluster, Host, Sweep

if TYPE_CHECKING:
    from pytest_ppsweep.launch import RankSpec


class CommandHost(Protocol):
    """Runs short commands on one node."""

    name: str
    address: str

    def run(self, argv: Sequence[str], timeout: float = 60.0) -> CommandResult: ...


class RankHandle(Protocol):
    """A started rank: whether it still runs, and how to stop it (idempotent)."""

    def poll(self) -> int | None: ...

    def stop(self, grace_s: float = 5.0) -> int | None: ...


class Launcher(Protocol):
    """Starts ranks of one cluster; ``labels`` identify them (run id, config id, node rank)."""

    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> RankHandle: ...


class LocalLauncher:
    """Ranks as processes on this machine, each in its own session (loopback "nodes")."""

    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> RankHandle:
        # Labels travel as environment variables: the only label a plain process can carry,
        # and what reap.find_local looks for after a crash.
        env = {**spec.env, **{label_env(k): v for k, v in labels.items()}}
        return LocalHost(spec.host, spec.address).spawn(spec.argv, env, log_path)


def label_env(label: str) -> str:
    """``ppsweep.run`` → ``PPSWEEP_RUN`` (labels of local processes live in their environment)."""
    return label.upper().replace(".", "_")


def host_for(cluster: Cluster, host: Host) -> CommandHost:
    """The command runner of one node of ``cluster`` (ssh: one shared connection per node)."""
    if cluster.kind == "local":
        return LocalHost(host.name, host.address)
    if cluster.kind == "ssh":
        # fabric/paramiko are imported only when a cluster is reached over SSH.
        from pytest_ppsweep.remote import SshSettings, ssh_host

        return ssh_host(host.name, host.address, SshSettings.from_cluster(cluster))
    raise NotImplementedError(
        f"cluster {cluster.name!r}: kind {cluster.kind!r} has no host backend in this version"
    )


def launcher_for(cluster: Cluster, sweep: Sweep | None = None) -> Launcher:
    """The rank launcher of ``cluster``. The docker launcher takes image, model path and devices
    from ``sweep``; built without one it only validates the cluster (and cannot start ranks)."""
    if cluster.kind == "local" and cluster.launcher == "process":
        return LocalLauncher()
    if cluster.kind == "ssh" and cluster.launcher == "process":
        from pytest_ppsweep.remote import SshSettings, ssh_host
        from pytest_ppsweep.ssh_launch import SshProcessLauncher

        settings = SshSettings.from_cluster(cluster)
        return SshProcessLauncher({h.address: ssh_host(h.name, h.address, settings)
                                   for h in cluster.hosts})
    if cluster.kind == "ssh" and cluster.launcher == "docker":
        from pytest_ppsweep.docker_launch import DockerLauncher

        if sweep is None:
            return DockerLauncher(cluster)
        return DockerLauncher(cluster, sweep.image, sweep.model_path, sweep.devices)
    raise NotImplementedError(
        f"cluster {cluster.name!r}: {cluster.kind} + {cluster.launcher} has no launcher in this "
        "version"
    )
