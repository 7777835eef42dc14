"""Every node's traces into the run folder (``profile/<layout>/``), with a bounded wait.

Traces are written on the node that runs the rank; the cluster's backend says where and how
they come back (``backend_of(cluster)``: ``trace_dir``, ``list_files``, ``fetch_files``). Ranks
that share this machine's file system (local processes) write straight into the run folder;
elsewhere they are written into ``<output_dir>/<run_id>/<layout>`` on each node (bind-mounted
into the containers, see :func:`with_profile_mounts`) and fetched: over SFTP on the run's shared
SSH connection, in one step per node on Slurm (``SlurmNodeHost.fetch_all``), by a copy for
containers on this machine. A node whose traces do not all appear within the timeout is named
with the ranks it lacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from pytest_ppsweep.cluster.backends import backend_of
from pytest_ppsweep.cluster.base import CommandHost, HostError
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep

from .tracenodes import node_ranks, rank_name, rank_of

POLL_S = 0.2


class ProfileError(RuntimeError):
    """The profile window failed: the server refused it, or a node's traces are missing."""


def remote_dir(cluster: Cluster, root: str, run_id: str, config_id: str, local: Path) -> str:
    """Where the ranks of ``cluster`` write their traces (``local`` where they share this
    machine's files)."""
    return backend_of(cluster).trace_dir(root, run_id, config_id, local)


def with_profile_mounts(sweep: Sweep) -> Sweep:
    """Docker clusters get ``[profile] output_dir`` bind-mounted read-write at the same path, so
    the traces a container writes are on its node for :func:`collect`."""
    spec = sweep.profile
    if spec is None:
        return sweep
    mount = f"{spec.output_dir}:{spec.output_dir}:rw"
    clusters = {
        name: replace(c, mounts=(*c.mounts, mount))
        if backend_of(c).in_containers and mount not in c.mounts
        else c
        for name, c in sweep.clusters.items()
    }
    return replace(sweep, clusters=clusters)


def _complete(
    now: dict[str, int], before: dict[str, int] | None, config: Config, nnodes: int, node: int,
    prefix: str,
) -> bool:
    """Every rank of ``node`` has a trace, non-empty and the same size as one poll earlier:
    the engine's profiler may write the file in place (SGLang's export_chrome_trace), so a file
    that is still growing is not done."""
    if missing_ranks(list(now), config, nnodes, node, prefix) or before is None:
        return False
    group = config.deployment.serve_group
    engine = engine_of(config.engine)
    mine = set(node_ranks(group.pp, group.tp, nnodes, node, engine))
    names = [n for n in now if n.startswith(prefix) and rank_of(n, group.pp, engine) in mine]
    return all(now[n] > 0 and before.get(n) == now[n] for n in names)


def missing_ranks(
    names: Sequence[str], config: Config, nnodes: int, node: int, prefix: str
) -> list[str]:
    """The ranks of ``node`` that none of ``names`` is the trace of."""
    group = config.deployment.serve_group
    engine = engine_of(config.engine)
    have = {rank_of(n, group.pp, engine) for n in names if n.startswith(prefix)}
    return [
        rank_name(p, t, group.pp, engine)
        for p, t in node_ranks(group.pp, group.tp, nnodes, node, engine)
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
    backend = backend_of(cluster)
    local.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    pending = set(range(nnodes))
    seen: dict[int, dict[str, int]] = {}
    while True:
        for node in sorted(pending):
            names = backend.list_files(host_for(node), folder)
            before, seen[node] = seen.get(node), names
            if _complete(names, before, config, nnodes, node, prefix):
                pending.discard(node)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)  # a bounded poll: the server writes the files after it answered
    if pending:
        lines = []
        for node in sorted(pending):
            h = cluster.hosts[node]
            where = h.address if h.name == h.address else f"{h.name}, {h.address}"
            lack = missing_ranks(list(seen.get(node, {})), config, nnodes, node, prefix)
            what = (f"no trace of rank {', '.join(lack)}" if lack
                    else "its traces were still being written")
            lines.append(f"node {node} ({where}): {what} in {folder} after {timeout_s:g} s")
        raise ProfileError(f"{config.id}: profile traces missing:\n" + "\n".join(lines))
    files: list[Path] = []
    group = config.deployment.serve_group
    for node in range(nnodes):
        engine = engine_of(config.engine)
        mine = set(node_ranks(group.pp, group.tp, nnodes, node, engine))
        traces = [name for name in sorted(seen[node])
                  if name.startswith(prefix) and rank_of(name, group.pp, engine) in mine]
        try:
            backend.fetch_files(host_for(node), folder, traces, local)
        except (OSError, HostError) as exc:
            raise ProfileError(f"node {cluster.hosts[node].name}: {exc}") from None
        files += [local / name for name in traces]
    return files
