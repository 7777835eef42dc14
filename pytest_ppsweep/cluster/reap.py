"""Leftover ranks of earlier (crashed or killed) runs: find them by label and remove them.

Every rank carries labels: the run id, the cluster, the configuration id and its node rank.
Containers carry them as Docker labels (``ppsweep.run`` …); processes carry them in their
environment (``PPSWEEP_RUN`` …, :func:`pytest_ppsweep.cluster.labels.label_env`), which is what
survives a killed pytest: the SSH sessions are gone, the detached ranks are not.

    leftovers = reap.find(cluster)                 # every run's, on every node, all at once
    leftovers = reap.find(cluster, run_id=run_id)  # one run's
    problems = reap.remove(cluster, leftovers)     # [] when everything is gone

On a local cluster all "nodes" are this machine, which other sessions may share: ``find`` only
returns ranks labelled with this cluster's name there, and :func:`find_blocking` only the
labelled ranks that would collide with this cluster's ranks (started with ``--host`` one of its
addresses and ``--port`` its HTTP port, or ``--dist-init-addr`` its rendezvous address), which
is what ``--ppsweep-reap`` removes on a local cluster.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ppsweep.cluster.backends import backend_of, host_for
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.labels import (
    CLUSTER_ENV,
    CLUSTER_LABEL,
    CONFIG_ENV,
    CONFIG_LABEL,
    NODE_RANK_ENV,
    NODE_RANK_LABEL,
    RUN_ENV,
    RUN_LABEL,
)
from pytest_ppsweep.cluster.registry import Registry, temporary
from pytest_ppsweep.cluster.slurm import cancel, cluster_of, commands, find_jobs, run_of, steps_of
from pytest_ppsweep.cluster.ssh import on_all
from pytest_ppsweep.cluster.ssh_launcher import stop_script
from pytest_ppsweep.engine.engines import ENGINES
from pytest_ppsweep.matrix.model import Cluster, Host
from pytest_ppsweep.matrix.slurmsettings import SlurmSettings

__all__ = ["Leftover", "find", "find_blocking", "remove"]


@dataclass(frozen=True)
class Leftover:
    """One rank left on a node: a container (by name) or a process group (by id)."""
    host: str
    address: str
    kind: str  # "container" or "process"
    ident: str  # container name, or process group id
    run: str
    cluster: str
    config: str
    node_rank: str
    status: str

    def __str__(self) -> str:
        kind = self.kind if self.kind != "process" else "process group"
        return (
            f"{self.host}: {kind} {self.ident} of run {self.run} ({self.config or '?'}, "
            f"node{self.node_rank or '?'}, {self.status})"
        )


# Prints "pid<TAB>pgid<TAB>run<TAB>cluster<TAB>config<TAB>node_rank" per labelled process; $1 is
# the wanted run id ("" for any). grep -l first: only labelled processes are read in detail.
_SCAN = rf"""
want=$1
for f in $(grep -l -s -a '{RUN_ENV}=' /proc/[0-9]*/environ 2>/dev/null); do
  p=${{f#/proc/}}; p=${{p%/environ}}
  [ "$p" = "$$" ] && continue
  e=$(tr '\000' '\n' < "$f" 2>/dev/null) || continue
  v() {{ printf '%s\n' "$e" | sed -n "s/^$1=//p" | head -n 1; }}
  run=$(v {RUN_ENV}); [ -n "$run" ] || continue
  [ -z "$want" ] || [ "$run" = "$want" ] || continue
  pg=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f3) || continue
  [ -n "$pg" ] || continue
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$pg" "$run" \
    "$(v {CLUSTER_ENV})" "$(v {CONFIG_ENV})" "$(v {NODE_RANK_ENV})"
done
true
"""


def _processes(
    cluster: Cluster, host: Host, run_id: str | None, registry: Registry
) -> list[Leftover]:
    argv = ["sh", "-c", _SCAN, "ppsweep-scan", run_id or ""]
    res = host_for(cluster, host, registry).run(argv, 60)
    if not res.ok:
        raise HostError(
            f"host {host.name}: cannot list processes (exit {res.exit_status}): "
            f"{res.stderr.strip()[:300]}"
        )
    groups: dict[str, Leftover] = {}
    for line in res.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) != 6:
            continue
        _pid, pgid, run, cl, config, rank = parts
        if backend_of(cluster).on_this_machine and cl != cluster.name:
            continue  # this machine is shared: only this cluster's ranks
        item = Leftover(host.name, host.address, "process", pgid, run, cl, config, rank, "running")
        groups.setdefault(pgid, item)
    return list(groups.values())


def _client(cluster: Cluster, host: Host, registry: Registry) -> Any:
    return backend_of(cluster).docker_client(host, registry)


def _containers(
    cluster: Cluster, host: Host, run_id: str | None, registry: Registry
) -> list[Leftover]:
    from docker.errors import DockerException

    label = f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL
    try:
        found = _client(cluster, host, registry).containers.list(all=True, filters={"label": label})
        if backend_of(cluster).on_this_machine:  # this machine is shared: only this cluster's
            found = [c for c in found if (c.labels or {}).get(CLUSTER_LABEL) == cluster.name]
    except DockerException as exc:
        raise HostError(f"host {host.name}: cannot list containers: {exc}") from None
    out = []
    for c in found:
        lab = c.labels or {}
        out.append(
            Leftover(
                host=host.name,
                address=host.address,
                kind="container",
                ident=str(c.name),
                run=lab.get(RUN_LABEL, ""),
                cluster=lab.get(CLUSTER_LABEL, ""),
                config=lab.get(CONFIG_LABEL, ""),
                node_rank=lab.get(NODE_RANK_LABEL, ""),
                status=str(c.status),
            )
        )
    return out


def _hosts(cluster: Cluster) -> tuple[Host, ...]:
    # loopback "nodes" are one machine: look once
    return backend_of(cluster).nodes_to_ask()


def find(
    cluster: Cluster,
    run_id: str | None = None,
    errors: list[str] | None = None,
    registry: Registry | None = None,
) -> list[Leftover]:
    """Every labelled rank (of ``run_id``, or of any run) on the nodes of ``cluster``.

    A node that cannot be asked raises :class:`HostError`, or, when ``errors`` is given, is
    described there and skipped. Connections come from ``registry`` (else they last for the
    call).
    """
    with temporary(registry) as reg:
        return _find(cluster, run_id, errors, reg)


def _find(
    cluster: Cluster, run_id: str | None, errors: list[str] | None, registry: Registry
) -> list[Leftover]:
    backend = backend_of(cluster)
    docker = backend.in_containers

    def one(host: Host) -> list[Leftover] | str:
        try:
            if docker:
                return _containers(cluster, host, run_id, registry)
            return _processes(cluster, host, run_id, registry)
        except HostError as exc:
            if errors is None:
                raise
            return str(exc)

    found: list[Leftover] = []
    if backend.nodes_from_allocation:
        try:
            found += _slurm_leftovers(cluster, run_id)
        except HostError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
    for result in on_all(_hosts(cluster), one):
        if isinstance(result, str):
            assert errors is not None
            errors.append(result)
        else:
            found += result
    return found


def earlier(cluster: Cluster, run_id: str, registry: Registry) -> list[Leftover]:
    """What the preflight reports of earlier runs: every labelled rank on the nodes (a node
    that cannot be asked is left to the preflight's node checks, which report it), or, where
    the backend does not reap by label (local processes: this machine is shared), the ranks of
    other runs that collide with this cluster's addresses and ports."""
    if not backend_of(cluster).reaps_by_label:
        return find_blocking(cluster, exclude_run=run_id)
    return find(cluster, errors=[], registry=registry)


def remove(
    cluster: Cluster,
    leftovers: Sequence[Leftover],
    grace_s: float = 2.0,
    registry: Registry | None = None,
) -> list[str]:
    """Stop and remove ``leftovers`` (all nodes at once); returns what could not be removed."""
    with temporary(registry) as reg:
        return _remove(cluster, leftovers, grace_s, reg)


def _remove(
    cluster: Cluster, leftovers: Sequence[Leftover], grace_s: float, registry: Registry
) -> list[str]:
    by_host: dict[str, list[Leftover]] = {}
    for item in leftovers:
        by_host.setdefault(item.address, []).append(item)
    hosts = {h.address: h for h in cluster.hosts}

    def one(address: str) -> list[str]:
        host = hosts.get(address) or Host(address=address, name=address)
        problems: list[str] = []
        for item in by_host[address]:
            try:
                if item.kind in ("slurm job", "slurm step"):
                    problems += cancel(commands(cluster), item.ident, f"{item}")
                elif item.kind == "container":
                    # stop first: the server gets SIGTERM (through init) and can clean up
                    container = _client(cluster, host, registry).containers.get(item.ident)
                    if item.status == "running":
                        container.stop(timeout=max(1, round(grace_s)))
                    container.remove(force=True)
                else:
                    res = host_for(cluster, host, registry).run(
                        ["sh", "-c", stop_script(int(item.ident), grace_s)], grace_s + 30
                    )
                    if not res.ok:
                        problems.append(f"{item}: survived SIGKILL")
            except Exception as exc:  # every failure is reported, none stops the others
                if type(exc).__name__ == "NotFound":
                    continue  # already gone
                problems.append(f"{item}: {exc}")
        return problems

    return [p for problems in on_all(sorted(by_host), one) for p in problems]


def _slurm_leftovers(cluster: Cluster, run_id: str | None) -> list[Leftover]:
    """Jobs named ``ppsweep-<run>+<this cluster>`` (allocations a killed run left; the
    cluster's own allocation is not one, nor another cluster's) and steps of the cluster's
    allocation named ``ppsweep-<run>+…`` (ranks)."""
    own = SlurmSettings.of(cluster)
    where = commands(cluster)
    out = []
    for jobid, name, state in find_jobs(where):
        run = run_of(name)
        if (jobid != own.jobid and (run_id is None or run == run_id)
                and cluster_of(name) in ("", cluster.name)):
            out.append(Leftover("slurm", "slurm", "slurm job", jobid, run, cluster.name, "",
                                "", state.lower()))
    if own.jobid:
        for stepid, name in steps_of(where, own.jobid):
            run = run_of(name)
            if run and (run_id is None or run == run_id):
                config = name.split("+")[1] if name.count("+") >= 2 else ""
                out.append(Leftover("slurm", "slurm", "slurm step", stepid, run, cluster.name,
                                    config, "", "running"))
    return out


def describe(leftovers: Sequence[Leftover]) -> str:
    """A readable list for a warning or an error."""
    return "\n".join(f"  {item}" for item in leftovers)


def find_local(run_id: str, cluster: str | None = None) -> list[int]:
    """PIDs of local rank processes labelled with ``run_id`` (and ``cluster`` if given)."""
    want = [f"{RUN_ENV}={run_id}".encode()]
    if cluster:
        want.append(f"{CLUSTER_ENV}={cluster}".encode())
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if all(w in environ for w in want):
            pids.append(int(entry.name))
    return pids


def reap_local(run_id: str, cluster: str | None = None) -> list[int]:
    """SIGKILL every local rank of ``run_id`` (and its process group); returns the PIDs."""
    pids = find_local(run_id, cluster)
    for pid in pids:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    return pids


def _environ(entry: Path) -> dict[str, str]:
    out = {}
    for item in (entry / "environ").read_bytes().split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _netns(proc: Path) -> int:
    """The network namespace of a /proc entry (its inode; -1 when it cannot be read)."""
    try:
        return (proc / "ns" / "net").stat().st_ino
    except OSError:
        return -1


def _holds(argv: Sequence[str], addresses: dict[str, Host], port: str,
           rendezvous: str) -> tuple[Host | None, bool]:
    """The node a rank's argv binds (of ``addresses``) and whether it holds, or would take,
    ``port`` there or the ``rendezvous`` address, as any engine reads its argv."""
    for engine in ENGINES.values():
        bound, bound_port, first = engine.rank_identity(argv)
        host = addresses.get(bound or "")
        if (host is not None and bound_port == port) or (
                first and engine.rendezvous_of(argv) == rendezvous):
            return host, True
    return None, False


def find_blocking(cluster: Cluster, exclude_run: str = "") -> list[Leftover]:
    """Local cluster: labelled rank processes of other runs (not ``exclude_run``) that hold,
    or would take, this cluster's ports: ``--host`` one of its addresses with ``--port`` its
    HTTP port, or ``--dist-init-addr`` its rendezvous address. One entry per process group."""
    addresses = {h.address: h for h in cluster.hosts}
    rendezvous = f"{cluster.rank0().address}:{cluster.dist_init_port}"
    groups: dict[str, Leftover] = {}
    here = _netns(Path("/proc/self"))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            # Only this user's ranks in this network namespace: another user's are not this
            # run's to remove (nor to advise removing), and a namespace of its own has its own
            # 127.0.6.x and ports (the preflight's port check names whoever holds one here).
            if entry.stat().st_uid != os.getuid() or _netns(entry) != here:
                continue
            env = _environ(entry)
            run = env.get(RUN_ENV, "")
            if not run or run == exclude_run:
                continue
            argv = [a.decode(errors="replace")
                    for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            pgid = os.getpgid(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
        host, holds = _holds(argv, addresses, str(cluster.port), rendezvous)
        if not holds:
            continue
        node = host or cluster.rank0()
        groups.setdefault(str(pgid), Leftover(
            node.name, node.address, "process", str(pgid), run, env.get(CLUSTER_ENV, ""),
            env.get(CONFIG_ENV, ""), env.get(NODE_RANK_ENV, ""), f"running, pid {entry.name}",
        ))
    return list(groups.values())
