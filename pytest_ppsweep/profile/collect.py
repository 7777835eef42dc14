"""Every node's traces into the run folder (``profile/<layout>/``), with a bounded wait.

Traces are written on the node that runs the rank. On a ``local`` cluster the nodes share this
machine's file system, so SGLang writes straight into the run folder. On ``ssh`` clusters
(process or docker launcher) they are written into ``<output_dir>/<run_id>/<layout>`` on each
node (bind-mounted into the containers, see :func:`with_profile_mounts`) and fetched over SFTP
on the run's shared SSH connection. A node whose traces do not all appear within the timeout
is named with the ranks it lacks.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from pytest_ppsweep.cluster.base import CommandHost, HostError
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep

from .placement import node_ranks, rank_name, rank_of

POLL_S = 0.2


class ProfileError(RuntimeError):
    """The profile window failed: the server refused it, or a node's traces are missing."""


def remote_dir(cluster: Cluster, root: str, run_id: str, config_id: str, local: Path) -> str:
    """Where the ranks of ``cluster`` write their traces (``local`` on a local cluster)."""
    if cluster.kind == "local":
        return str(local)
    return f"{root.rstrip('/')}/{run_id}/{config_id}"


def with_profile_mounts(sweep: Sweep) -> Sweep:
    """Docker clusters get ``[profile] output_dir`` bind-mounted read-write at the same path, so
    the traces a container writes are on its node for :func:`collect`."""
    spec = sweep.profile
    if spec is None:
        return sweep
    mount = f"{spec.output_dir}:{spec.output_dir}:rw"
    clusters = {
        name: replace(c, mounts=(*c.mounts, mount))
        if c.launcher == "docker" and mount not in c.mounts
        else c
        for name, c in sweep.clusters.items()
    }
    return replace(sweep, clusters=clusters)


def _listing(host: CommandHost, folder: str) -> list[str]:
    res = host.run(["sh", "-c", f"ls -1 {shlex.quote(folder)} 2>/dev/null || true"], timeout=30)
    return [line.strip() for line in res.stdout.splitlines() if line.strip()]


def missing_ranks(
    names: Sequence[str], config: Config, nnodes: int, node: int, prefix: str
) -> list[str]:
    """The ranks of ``node`` that none of ``names`` is the trace of."""
    have = {rank_of(n, config.pp) for n in names if n.startswith(prefix)}
    return [
        rank_name(p, t, config.pp)
        for p, t in node_ranks(config.pp, config.tp, nnodes, node)
        if (p, t) not in have
    ]


def collect_traces(
    cluster: Cluster,
    config: Config,
    folder: str,
    local: Path,
    prefix: str,
    *,
    host_for: Callable[[int], CommandHost],
    timeout_s: float,
) -> list[Path]:
    """Wait (at most ``timeout_s``) for every rank's trace on its node, bring them to ``local``.

    Raises :class:`ProfileError` naming each node whose traces are missing, with the ranks.
    """
    nnodes = len(cluster.hosts)
    local.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    pending = set(range(nnodes))
    seen: dict[int, list[str]] = {}
    while True:
        for node in sorted(pending):
            if cluster.kind == "local":
                names = [p.name for p in local.iterdir()]
            else:
                names = _listing(host_for(node), folder)
            seen[node] = names
            if not missing_ranks(names, config, nnodes, node, prefix):
                pending.discard(node)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)  # a bounded poll: the server writes the files after it answered
    if pending:
        lines = []
        for node in sorted(pending):
            h = cluster.hosts[node]
            where = h.address if h.name == h.address else f"{h.name}, {h.address}"
            lack = missing_ranks(seen.get(node, []), config, nnodes, node, prefix)
            lines.append(
                f"node {node} ({where}): no trace of rank {', '.join(lack)} in "
                f"{folder} after {timeout_s:g} s"
            )
        raise ProfileError(f"{config.id}: profile traces missing:\n" + "\n".join(lines))
    files: list[Path] = []
    for node in range(nnodes):
        mine = set(node_ranks(config.pp, config.tp, nnodes, node))
        for name in sorted(seen[node]):
            if not name.startswith(prefix) or rank_of(name, config.pp) not in mine:
                continue
            target = local / name
            if cluster.kind != "local":
                _fetch(host_for(node), f"{folder}/{name}", target, cluster.hosts[node].name)
            files.append(target)
    return files


def _fetch(host: CommandHost, remote: str, target: Path, node: str) -> None:
    """SFTP over the host's fabric connection (``SshHost.connection``)."""
    connection = getattr(host, "connection", None)
    if connection is None:
        raise ProfileError(f"node {node}: cannot fetch {remote}: the host has no SSH connection")
    try:
        connection().get(remote, str(target))
    except (OSError, HostError) as exc:
        raise ProfileError(f"node {node}: cannot fetch {remote} over SFTP: {exc}") from None
