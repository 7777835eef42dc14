"""``kind = "local"``, ``launcher = "docker"``: ranks as containers of the sweep's image on this
machine, through the docker SDK on the local socket (``DOCKER_HOST`` when set, else
``unix:///var/run/docker.sock``); no SSH. One labelled container per rank, as Docker over SSH
starts them (cluster/docker_launcher.py, with this machine's daemon in place of each node's).

The nodes are this machine (one, or several loopback addresses as a local cluster's): commands
run here (cluster/hosts.py), the ports and GPUs are looked at once, and the profiler's traces
are written into ``[profile] output_dir`` (bind-mounted into the containers) and copied from
there. The daemon outlives a killed pytest, so leftovers are found by label, as over SSH, but
only this cluster's: the machine is shared."""

from __future__ import annotations

import os
import shutil
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ppsweep.cluster.backend import Backend, NodeCheck, local_listing
from pytest_ppsweep.cluster.base import CommandHost, CommandResult, HostError, Launcher
from pytest_ppsweep.cluster.hosts import LocalHost
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Host, Sweep

DEFAULT_SOCKET = "unix:///var/run/docker.sock"


def local_socket() -> str:
    """This machine's dockerd, as the docker CLI finds it."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def connect_local(base_url: str, timeout: int = 120) -> Any:
    """A new docker client of the daemon at ``base_url``."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.DockerClient(base_url=base_url, timeout=timeout)
        client.ping()
    except DockerException as exc:
        raise HostError(f"this machine: no docker daemon answers on {base_url}: {exc}") from None
    return client


class LocalDaemon:
    """The docker daemon of this machine, every node's (a ``docker_launcher.Daemons``)."""

    def __init__(self, registry: Registry, base_url: str = "") -> None:
        self.registry = registry
        self.base_url = base_url or local_socket()

    def client(self, name: str, address: str) -> Any:
        client: Any = self.registry.shared(("docker", self.base_url),
                                           lambda: connect_local(self.base_url))
        return client

    def target(self, address: str) -> str:
        return self.base_url


class LocalDockerBackend(Backend):
    kind = "local"
    launcher_name = "docker"
    on_this_machine = True
    flags_where = "in the image on this machine's dockerd (a throwaway container)"
    engine_here = True

    def engine_id(self, sweep: Sweep) -> Hashable:
        return ("image", sweep.image)

    def engine_where(self, sweep: Sweep) -> str:
        return f"in image {sweep.image} on this machine's dockerd"

    def run_engine(self, sweep: Sweep, argv: Sequence[str], env: Mapping[str, str],
                   registry: Registry, timeout: float, node: Host | None = None
                   ) -> CommandResult:
        from pytest_ppsweep.cluster.docker_launcher import DockerLauncher

        launcher = DockerLauncher(self.cluster, sweep.image, sweep.model_path, sweep.devices,
                                  registry, daemons=LocalDaemon(registry))
        host = node or self.cluster.rank0()
        return launcher.run_once(host.name, host.address, argv, env, timeout)

    def host(self, host: Host, registry: Registry | None = None) -> CommandHost:
        return LocalHost(host.name, host.address)

    def docker_client(self, host: Host, registry: Registry) -> Any:
        return LocalDaemon(registry).client(host.name, host.address)

    def launcher(self, sweep: Sweep | None = None, registry: Registry | None = None) -> Launcher:
        from pytest_ppsweep.cluster.docker_launcher import DockerLauncher

        registry = registry if registry is not None else Registry()
        daemon = LocalDaemon(registry)
        if sweep is None:
            return DockerLauncher(self.cluster, registry=registry, daemons=daemon)
        return DockerLauncher(self.cluster, sweep.image, sweep.model_path, sweep.devices,
                              registry, daemons=daemon)

    def list_files(self, host: CommandHost, folder: str) -> dict[str, int]:
        return local_listing(Path(folder))

    def fetch_files(self, host: CommandHost, folder: str, names: Sequence[str],
                    local: Path) -> None:
        for name in names:
            shutil.copyfile(Path(folder) / name, local / name)

    def node_checks(self, rank0: bool) -> tuple[NodeCheck, ...]:
        # one machine: its image, paths and GPUs are looked at once
        if rank0:
            return ("image", "flags", "paths", "gpus", "local_ports")
        return ("local_ports",)
