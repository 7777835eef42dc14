"""Step 2, the nodes: hosts and launchers (local, ssh, ssh-process, docker), the rank command
(rankspec), labels, preflight, node info and reaping of leftovers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.cluster.backends import (
        host_for,
        launcher_for,
    )
    from pytest_ppsweep.cluster.base import (
        CommandHost,
        CommandResult,
        HostError,
        Launcher,
        RankHandle,
    )
    from pytest_ppsweep.cluster.docker_launcher import (
        DEFAULT_SHM_SIZE,
        RUN_LABEL,
        DockerLauncher,
        DockerRank,
        connect_docker,
        container_name,
        device_host_path,
        device_mapping,
        mount_spec,
        shared_client,
    )
    from pytest_ppsweep.cluster.hosts import (
        LocalHost,
        LocalLauncher,
        LocalProcess,
    )
    from pytest_ppsweep.cluster.labels import (
        label_env,
    )
    from pytest_ppsweep.cluster.nodeinfo import (
        GPU_QUERY,
        VERSIONS_SCRIPT,
        docker_for,
        metadata,
        node_python,
        smi_argv,
    )
    from pytest_ppsweep.cluster.preflight import (
        PreflightError,
        check,
        message,
        require,
    )
    from pytest_ppsweep.cluster.rankspec import (
        RankSpec,
        cpu_bind,
        describe,
        local_path,
        rank_specs,
        server_flags,
    )
    from pytest_ppsweep.cluster.reap import (
        Leftover,
        find,
        remove,
    )
    from pytest_ppsweep.cluster.registry import (
        Registry,
        temporary,
    )
    from pytest_ppsweep.cluster.ssh import (
        HostConnectionError,
        SshHost,
        SshSettings,
        on_all,
        shared_host,
    )
    from pytest_ppsweep.cluster.ssh_launcher import (
        KILLED,
        REMOTE_ROOT,
        SshProcessLauncher,
        SshRank,
        remote_dir,
        safe_name,
        start_script,
        stop_script,
    )

_NAMES = {
    "host_for": "backends",
    "launcher_for": "backends",
    "CommandHost": "base",
    "CommandResult": "base",
    "HostError": "base",
    "Launcher": "base",
    "RankHandle": "base",
    "DEFAULT_SHM_SIZE": "docker_launcher",
    "DockerLauncher": "docker_launcher",
    "DockerRank": "docker_launcher",
    "RUN_LABEL": "docker_launcher",
    "container_name": "docker_launcher",
    "device_host_path": "docker_launcher",
    "device_mapping": "docker_launcher",
    "mount_spec": "docker_launcher",
    "connect_docker": "docker_launcher",
    "shared_client": "docker_launcher",
    "shared_host": "ssh",
    "Registry": "registry",
    "temporary": "registry",
    "LocalHost": "hosts",
    "LocalLauncher": "hosts",
    "LocalProcess": "hosts",
    "label_env": "labels",
    "GPU_QUERY": "nodeinfo",
    "VERSIONS_SCRIPT": "nodeinfo",
    "docker_for": "nodeinfo",
    "metadata": "nodeinfo",
    "node_python": "nodeinfo",
    "smi_argv": "nodeinfo",
    "PreflightError": "preflight",
    "check": "preflight",
    "message": "preflight",
    "require": "preflight",
    "RankSpec": "rankspec",
    "cpu_bind": "rankspec",
    "describe": "rankspec",
    "local_path": "rankspec",
    "rank_specs": "rankspec",
    "server_flags": "rankspec",
    "Leftover": "reap",
    "find": "reap",
    "remove": "reap",
    "HostConnectionError": "ssh",
    "SshHost": "ssh",
    "SshSettings": "ssh",
    "on_all": "ssh",
    "KILLED": "ssh_launcher",
    "REMOTE_ROOT": "ssh_launcher",
    "SshProcessLauncher": "ssh_launcher",
    "SshRank": "ssh_launcher",
    "remote_dir": "ssh_launcher",
    "safe_name": "ssh_launcher",
    "start_script": "ssh_launcher",
    "stop_script": "ssh_launcher",
}
__all__ = [
    "DEFAULT_SHM_SIZE",
    "GPU_QUERY",
    "KILLED",
    "REMOTE_ROOT",
    "RUN_LABEL",
    "VERSIONS_SCRIPT",
    "CommandHost",
    "CommandResult",
    "DockerLauncher",
    "DockerRank",
    "HostConnectionError",
    "HostError",
    "Launcher",
    "Leftover",
    "LocalHost",
    "LocalLauncher",
    "LocalProcess",
    "PreflightError",
    "RankHandle",
    "RankSpec",
    "Registry",
    "SshHost",
    "SshProcessLauncher",
    "SshRank",
    "SshSettings",
    "check",
    "connect_docker",
    "container_name",
    "cpu_bind",
    "describe",
    "device_host_path",
    "device_mapping",
    "docker_for",
    "find",
    "host_for",
    "label_env",
    "launcher_for",
    "local_path",
    "message",
    "metadata",
    "mount_spec",
    "node_python",
    "on_all",
    "rank_specs",
    "remote_dir",
    "remove",
    "require",
    "safe_name",
    "server_flags",
    "shared_client",
    "shared_host",
    "smi_argv",
    "start_script",
    "stop_script",
    "temporary",
]
__getattr__ = lazy(__name__, _NAMES)
