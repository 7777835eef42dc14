"""``kind = "ssh"``: nodes reached over SSH, with ranks as processes (``launcher = "process"``,
cluster/ssh_launcher.py) or as containers through the docker SDK over ``ssh://``
(``launcher = "docker"``, cluster/docker_launcher.py). Traces come back over SFTP."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from pytest_ppsweep.cluster.backend import Backend, NodeCheck
from pytest_ppsweep.cluster.base import CommandHost, CommandResult, Launcher
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Host, Sweep


class _SshBackend(Backend):
    kind = "ssh"

    def host(self, host: Host, registry: Registry | None = None) -> CommandHost:
        # fabric/paramiko are imported only when a cluster is reached over SSH.
        from pytest_ppsweep.cluster.ssh import SshHost, SshSettings, shared_host

        settings = SshSettings.from_cluster(self.cluster)
        if registry is None:
            return SshHost(host.name, host.address, settings)
        return shared_host(registry, host.name, host.address, settings)

    start_check: NodeCheck  # the server can start on the node: its module or its image

    def node_checks(self, rank0: bool) -> tuple[NodeCheck, ...]:
        if rank0:  # the server's own parser, once (run_engine)
            return (self.start_check, "flags", "paths", "gpus", "ports")
        return (self.start_check, "paths", "gpus", "ports")


class SshProcessBackend(_SshBackend):
    launcher_name = "process"
    start_check = "module"
    flags_where = "over SSH on node 0, with the ranks' interpreter and environment"

    def launcher(self, sweep: Sweep | None = None, registry: Registry | None = None) -> Launcher:
        from pytest_ppsweep.cluster.ssh import SshSettings, shared_host
        from pytest_ppsweep.cluster.ssh_launcher import SshProcessLauncher

        registry = registry if registry is not None else Registry()
        settings = SshSettings.from_cluster(self.cluster)
        return SshProcessLauncher({h.address: shared_host(registry, h.name, h.address, settings)
                                   for h in self.cluster.hosts})


class SshDockerBackend(_SshBackend):
    launcher_name = "docker"
    start_check = "image"
    flags_where = "in the image on node 0 (a throwaway container, over SSH)"

    def engine_id(self, sweep: Sweep) -> Hashable:
        return ("image", sweep.image)

    def engine_where(self, sweep: Sweep) -> str:
        host = self.cluster.rank0()
        return f"in image {sweep.image} on node 0 {host.name} ({host.address})"

    def run_engine(self, sweep: Sweep, argv: Sequence[str], env: Mapping[str, str],
                   registry: Registry, timeout: float, node: Host | None = None
                   ) -> CommandResult:
        from pytest_ppsweep.cluster.docker_launcher import DockerLauncher

        launcher = DockerLauncher(self.cluster, sweep.image, sweep.model_path, sweep.devices,
                                  registry, daemons=self.daemons(registry))
        host = node or self.cluster.rank0()
        return launcher.run_once(host.name, host.address, argv, env, timeout)

    def daemons(self, registry: Registry) -> Any:
        """Each node's dockerd, over ``ssh://`` with the cluster's key and known_hosts."""
        from pytest_ppsweep.cluster.docker_launcher import SshDaemons
        from pytest_ppsweep.cluster.ssh import SshSettings

        return SshDaemons(SshSettings.from_cluster(self.cluster), registry)

    def docker_client(self, host: Host, registry: Registry) -> Any:
        return self.daemons(registry).client(host.name, host.address)

    def launcher(self, sweep: Sweep | None = None, registry: Registry | None = None) -> Launcher:
        from pytest_ppsweep.cluster.docker_launcher import DockerLauncher

        registry = registry if registry is not None else Registry()
        if sweep is None:
            return DockerLauncher(self.cluster, registry=registry, daemons=self.daemons(registry))
        return DockerLauncher(self.cluster, sweep.image, sweep.model_path, sweep.devices,
                              registry, daemons=self.daemons(registry))
