"""Which backend a cluster uses: the one place that maps ``(kind, launcher)`` to code.

Which pairs exist, and what each is (its launchers, where its nodes come from, its own keys),
is the table of kinds, matrix/kinds.py. Each kind is one module with one
:class:`~pytest_ppsweep.cluster.backend.Backend` per launcher, each class naming the pair it is
the code of; :data:`BACKENDS` is derived from the table and :data:`CODE`, and this module fails
to import when a pair of the table has no class, or a class names a pair the table has not. A new
kind is its row there, its module and its class's line in :data:`CODE`. Every backend offers the
same surface, so the rest of the package never branches on the cluster kind:

* a *host* runs short commands: ``run(argv, timeout) -> CommandResult`` (nvidia-smi, preflight);
* a *launcher* starts one rank per node and returns a handle with ``poll()`` and ``stop()``; the
  rank's output must end up in the local ``log_path`` while it runs (remote launchers stream it);
* the rest of its capabilities: see :class:`~pytest_ppsweep.cluster.backend.Backend`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set

from pytest_ppsweep.cluster.backend import Backend
from pytest_ppsweep.cluster.base import CommandHost, Launcher
from pytest_ppsweep.cluster.kind_local import LocalProcessBackend
from pytest_ppsweep.cluster.kind_local_docker import LocalDockerBackend
from pytest_ppsweep.cluster.kind_slurm import SlurmBackend
from pytest_ppsweep.cluster.kind_ssh import SshDockerBackend, SshProcessBackend
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix import kinds
from pytest_ppsweep.matrix.model import Cluster, Host, Sweep

# the code of every (kind, launcher) of the table of kinds (matrix/kinds.py), one class each
CODE: tuple[type[Backend], ...] = (
    LocalProcessBackend,
    LocalDockerBackend,
    SshProcessBackend,
    SshDockerBackend,
    SlurmBackend,
)


def pair_code(code: Iterable[type[Backend]], pairs: Set[tuple[str, str]]
             ) -> dict[tuple[str, str], type[Backend]]:
    """(kind, launcher) → its class, for every pair of ``pairs`` (the table of kinds'); a
    TypeError when a pair has no class, two classes name one pair, or a class names a pair that
    is not in the table."""
    out: dict[tuple[str, str], type[Backend]] = {}
    for cls in code:
        pair = (cls.kind, cls.launcher_name)
        if pair not in pairs:
            raise TypeError(f"{cls.__name__} is the code of {pair[0]} + {pair[1]}, which the "
                            "table of kinds (matrix/kinds.py) does not name")
        if pair in out:
            raise TypeError(f"{out[pair].__name__} and {cls.__name__} are both the code of "
                            f"{pair[0]} + {pair[1]}")
        out[pair] = cls
    missing = sorted(pairs - set(out))
    if missing:
        raise TypeError("no Backend for " + ", ".join(f"{k} + {launcher}"
                                                      for k, launcher in missing)
                        + " of the table of kinds (matrix/kinds.py)")
    return out


# (kind, launcher) → the backend class of a cluster of that kind
BACKENDS: Mapping[tuple[str, str], type[Backend]] = pair_code(CODE, kinds.pairs())


def backend_of(cluster: Cluster) -> Backend:
    """The backend of ``cluster``'s kind and launcher."""
    make = BACKENDS.get((cluster.kind, cluster.launcher))
    if make is None:
        raise NotImplementedError(
            f"cluster {cluster.name!r}: {cluster.kind} + {cluster.launcher} has no backend in "
            "this version"
        )
    return make.for_cluster(cluster)


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
