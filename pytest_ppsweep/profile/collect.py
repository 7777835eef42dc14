"""Every node's traces into the run folder (``profile/<layout>/``), with a bounded wait.

Traces are written on the node that runs the rank. On a ``local`` cluster the nodes share this
machine's file system, so SGLang writes straight into the run folder. On ``ssh`` clusters
(process or docker launcher) they are written into ``<output_dir>/<run_id>/<layout>`` on each
node (bind-mounted into the containers, see :func:`with_profile_mounts`) and fetched over SFTP
on the run's shared SSH connection; on ``slurm`` clusters likewise, read back in one step per
node (``SlurmNodeHost.fetch_all``). A node whose traces do not all appear within the timeout
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


def _listing(host: CommandHost, folder: str) -> dict[str, int]:
    """File name → size in ``folder`` on the node (empty when the folder is not there yet)."""
    script = f"find {shlex.quote(folder)} -maxdepth 1 -type f -printf '%s %f\\n' 2>/dev/null"
    res = host.run(["sh", "-c", script + " || true"], timeout=30)
    out: dict[str, int] = {}
    for line in res.stdout.splitlines():
        size, _, name = line.strip().partition(" ")
        if name and size.isdigit():
            out[name] = int(size)
    return out


def _local_listing(folder: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in folder.iterdir():
        try:
            if p.is_file():
                out[p.name] = p.stat().st_size
        except OSError:
            continue  # renamed or removed meanwhile
    return out


def _complete(
    now: dict[str, int], before: dict[str, int] | None, config: Config, nnodes: int, node: int,
    prefix: str,
) -> bool:
    """Every rank of ``node`` has a trace, non-empty and the same size as one poll earlier:
    SGLang's profiler writes the file in place (export_chrome_trace), so a file that is still
    growing is not done."""
    if missing_ranks(list(now), config, nnodes, node, prefix) or before is None:
        return False
    mine = set(node_ranks(config.pp, config.tp, nnodes, node))
    names = [n for n in now if n.startswith(prefix) and rank_of(n, config.pp) in mine]
    return all(now[n] > 0 and before.get(n) == now[n] for n in names)


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
    seen: dict[int, dict[str, int]] = {}
    while True:
        for node in sorted(pending):
            if cluster.kind == "local":
                names = _local_listing(local)
            else:
                names = _listing(host_for(node), folder)
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
    for node in range(nnodes):
        mine = set(node_ranks(config.pp, config.tp, nnodes, node))
        traces = [name for name in sorted(seen[node])
                  if name.startswith(prefix) and rank_of(name, config.pp) in mine]
        if cluster.kind != "local":
            host, where = host_for(node), cluster.hosts[node].name
            fetch_all = getattr(host, "fetch_all", None)
            if fetch_all is not None:  # a Slurm node: all its traces read back in one step
                try:
                    fetch_all(folder, traces, local)
                except (OSError, HostError) as exc:
                    raise ProfileError(f"node {where}: cannot fetch its traces: {exc}") from None
            else:
                for name in traces:
                    _fetch(host, f"{folder}/{name}", local / name, where)
        files += [local / name for name in traces]
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
