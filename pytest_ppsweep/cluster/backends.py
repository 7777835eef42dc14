"""Which host and launcher a cluster uses: the one place that maps ``kind``/``launcher`` to code.

Every backend offers the same small surface, so launch.py and run/ never branch on the
cluster kind:

* a *host* runs short commands: ``run(argv, timeout) -> CommandResult`` (nvidia-smi, preflight);
* a *launcher* starts one rank per node and returns a handle with ``poll()`` and ``stop()``; the
  rank's output must end up in the local ``log_path`` while it runs (remote launchers stream it).
"""

from __future__ import annotations

from pytest_ppsweep.cluster.base import CommandHost, Launcher
from pytest_ppsweep.cluster.hosts import LocalHost, LocalLauncher
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Cluster, Host, Sweep

SLURM = "slurm"  # the kind whose nodes come from an allocation (prepare)


def prepare(
    pool: tuple[Cluster, ...], run_id: str, registry: Registry, jobid: str = "",
    reap: bool = False,
) -> tuple[Cluster, ...]:
    """The pool with every slurm cluster's nodes taken from its allocation (taken by jobid, or
    made now and kept in ``registry``: closing the registry releases it); other kinds as they
    are. ``jobid``: --ppsweep-slurm-jobid (one slurm cluster in the pool); ``reap``:
    --ppsweep-reap (allocations of earlier runs are cancelled before a new one is asked for)."""
    slurm = [c for c in pool if c.kind == SLURM]
    if not slurm:
        return pool
    from pytest_ppsweep.cluster.slurm import resolve

    if jobid and len(slurm) > 1:
        raise ValueError(
            f"--ppsweep-slurm-jobid {jobid}: expected one slurm cluster in the pool, found "
            f"{len(slurm)}: {', '.join(c.name for c in slurm)} (give each its 'jobid' key)"
        )
    return tuple(resolve(c, run_id, registry, jobid, reap) if c.kind == SLURM else c for c in pool)


def host_for(cluster: Cluster, host: Host, registry: Registry | None = None) -> CommandHost:
    """The command runner of one node of ``cluster`` (ssh: the registry's shared connection
    of the node; without a registry, a connection of its own)."""
    if cluster.kind == "local":
        return LocalHost(host.name, host.address)
    if cluster.kind == "ssh":
        # fabric/paramiko are imported only when a cluster is reached over SSH.
        from pytest_ppsweep.cluster.ssh import SshHost, SshSettings, shared_host

        settings = SshSettings.from_cluster(cluster)
        if registry is None:
            return SshHost(host.name, host.address, settings)
        return shared_host(registry, host.name, host.address, settings)
    if cluster.kind == "slurm":
        # a one-task step on the node, in the run's allocation (cluster/slurm.py)
        from pytest_ppsweep.cluster.slurm import SlurmNodeHost

        return SlurmNodeHost(cluster, host)
    raise NotImplementedError(
        f"cluster {cluster.name!r}: kind {cluster.kind!r} has no host backend in this version"
    )


def launcher_for(
    cluster: Cluster, sweep: Sweep | None = None, registry: Registry | None = None
) -> Launcher:
    """The rank launcher of ``cluster``. The docker launcher takes image, model path and devices
    from ``sweep``; built without one it only validates the cluster (and cannot start ranks).
    Remote launchers take their connections from ``registry`` (a fresh one when None)."""
    registry = registry if registry is not None else Registry()
    if cluster.kind == "local" and cluster.launcher == "process":
        return LocalLauncher()
    if cluster.kind == "ssh" and cluster.launcher == "process":
        from pytest_ppsweep.cluster.ssh import SshSettings, shared_host
        from pytest_ppsweep.cluster.ssh_launcher import SshProcessLauncher

        settings = SshSettings.from_cluster(cluster)
        return SshProcessLauncher({h.address: shared_host(registry, h.name, h.address, settings)
                                   for h in cluster.hosts})
    if cluster.kind == "ssh" and cluster.launcher == "docker":
        from pytest_ppsweep.cluster.docker_launcher import DockerLauncher

        if sweep is None:
            return DockerLauncher(cluster, registry=registry)
        return DockerLauncher(cluster, sweep.image, sweep.model_path, sweep.devices, registry)
    if cluster.kind == "slurm" and cluster.launcher == "process":
        # one job step per layout in the run's allocation (cluster/slurm.py)
        from pytest_ppsweep.cluster.slurm import SlurmLauncher

        return SlurmLauncher(cluster)
    raise NotImplementedError(
        f"cluster {cluster.name!r}: {cluster.kind} + {cluster.launcher} has no launcher in this "
        "version"
    )
