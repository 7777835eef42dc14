"""Which backend a cluster uses: the one place that maps ``(kind, launcher)`` to code.

Each kind is one module with one :class:`~pytest_ppsweep.cluster.backend.Backend` (or a
factory choosing among variants, as Slurm with or without Pyxis), registered in
:data:`BACKENDS` below; a new kind is a new module and its line here (and its row of the sweep
file's table of kinds, matrix/kinds.py, which tests/cluster/test_backends.py keeps equal to
this one). Every backend offers the same surface, so the rest of the package never branches on
the cluster kind:

* a *host* runs short commands: ``run(argv, timeout) -> CommandResult`` (nvidia-smi, preflight);
* a *launcher* starts one rank per node and returns a handle with ``poll()`` and ``stop()``; the
  rank's output must end up in the local ``log_path`` while it runs (remote launchers stream it);
* the rest of its capabilities: see :class:`~pytest_ppsweep.cluster.backend.Backend`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pytest_ppsweep.cluster.backend import Backend
from pytest_ppsweep.cluster.base import CommandHost, Launcher
from pytest_ppsweep.cluster.kind_local import LocalProcessBackend
from pytest_ppsweep.cluster.kind_local_docker import LocalDockerBackend
from pytest_ppsweep.cluster.kind_slurm import slurm_backend
from pytest_ppsweep.cluster.kind_ssh import SshDockerBackend, SshProcessBackend
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Cluster, Host, Sweep

# (kind, launcher) → the backend of a cluster of that kind
BACKENDS: Mapping[tuple[str, str], Callable[[Cluster], Backend]] = {
    ("local", "process"): LocalProcessBackend,
    ("local", "docker"): LocalDockerBackend,
    ("ssh", "process"): SshProcessBackend,
    ("ssh", "docker"): SshDockerBackend,
    ("slurm", "process"): slurm_backend,
}


def backend_of(cluster: Cluster) -> Backend:
    """The backend of ``cluster``'s kind and launcher."""
    make = BACKENDS.get((cluster.kind, cluster.launcher))
    if make is None:
        raise NotImplementedError(
            f"cluster {cluster.name!r}: {cluster.kind} + {cluster.launcher} has no backend in "
            "this version"
        )
    return make(cluster)


def prepare(
    pool: tuple[Cluster, ...], run_id: str, registry: Registry, jobid: str = "",
    reap: bool = False,
) -> tuple[Cluster, ...]:
    """The pool with every cluster's nodes known: those of an allocation taken by jobid, or
    made now and kept in ``registry`` (closing the registry releases it); other kinds as they
    are. ``jobid``: --ppsweep-slurm-jobid (one such cluster in the pool); ``reap``:
    --ppsweep-reap (allocations of earlier runs are cancelled before a new one is asked for)."""
    allocated = [c for c in pool if backend_of(c).nodes_from_allocation]
    if not allocated:
        return pool
    if jobid and len(allocated) > 1:
        raise ValueError(
            f"--ppsweep-slurm-jobid {jobid}: expected one slurm cluster in the pool, found "
            f"{len(allocated)}: {', '.join(c.name for c in allocated)} (give each its 'jobid' "
            "key)"
        )
    return tuple(backend_of(c).prepare(run_id, registry, jobid, reap) for c in pool)


def host_for(cluster: Cluster, host: Host, registry: Registry | None = None) -> CommandHost:
    """The command runner of one node of ``cluster`` (ssh: the registry's shared connection
    of the node; without a registry, a connection of its own)."""
    return backend_of(cluster).host(host, registry)


def launcher_for(
    cluster: Cluster, sweep: Sweep | None = None, registry: Registry | None = None
) -> Launcher:
    """The rank launcher of ``cluster``. The docker launcher takes image, model path and devices
    from ``sweep``; built without one it only validates the cluster (and cannot start ranks).
    Remote launchers take their connections from ``registry`` (a fresh one when None)."""
    return backend_of(cluster).launcher(sweep, registry)
