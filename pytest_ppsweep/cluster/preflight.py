"""Before the first boot: is every node ready? And what are the nodes (run metadata)?

:func:`check` asks every node at once and returns every problem of every node, so one failure
message lists them all and nothing is booted until they are fixed:

* the server can start: the image is present (docker) or ``python -m <server_module>`` is
  importable (process) by the ranks' interpreter in the ranks' environment;
* the model path and every device of ``[sweep] devices`` exist on the node;
* the server's own parser, run where the engine runs (the backend's ``run_engine``: on node 0
  with the ranks' interpreter and environment, in the image on node 0, in a Pyxis step on node
  0), accepts every server flag and ``[axes]`` key of the sweep, and every enumerated value is
  one of its choices (:mod:`~pytest_ppsweep.cluster.serverflags`); once per engine (image) in a
  run, and in the dry run too (:func:`dry_run_flags`);
* the GPUs are idle (no compute process in ``nvidia-smi``; the emulator's shim stands in);
* nothing answers on the HTTP port (nor on the rendezvous port of node 0) yet.

:func:`metadata` describes the nodes for ``reports/<run>/metadata/``: host names, GPU names and
driver from nvidia-smi, and, as the server's environment reports them, the image id and the
SGLang version.

Local clusters (loopback "nodes" on this machine) check that the server module imports and
that every rank's HTTP port and node 0's rendezvous port are free, naming the process that holds
a busy one (pid, command line, the run whose rank it is; :mod:`~pytest_ppsweep.cluster.ports`):
the emulator reads no model and the GPU shim's state is shared with other sessions. A busy port
points to ``--ppsweep-reap``, which removes the ranks earlier runs left there.
"""

from __future__ import annotations

import re
import shlex
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial

from pytest_ppsweep.cluster import serverflags
from pytest_ppsweep.cluster.backend import NodeCheck
from pytest_ppsweep.cluster.backends import backend_of, host_for
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.nodeinfo import (
    docker_for,
    hide_secrets,
    node_python,
    rank_envs,
    smi_command,
)
from pytest_ppsweep.cluster.ports import listeners
from pytest_ppsweep.cluster.rankspec import rank_specs, with_env
from pytest_ppsweep.cluster.registry import Registry, temporary
from pytest_ppsweep.cluster.slurm import check_pyxis, import_image
from pytest_ppsweep.cluster.ssh import HostConnectionError, on_all
from pytest_ppsweep.matrix.model import Cluster, Config, Host, Sweep

__all__ = ["PreflightError", "check", "dry_run_flags", "message", "read_server_flags", "require",
           "resources"]

APPS_QUERY = ("--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader")
_IMPORTABLE = (
    "import importlib.util, sys\n"
    "try:\n    ok = importlib.util.find_spec(sys.argv[1]) is not None\n"
    "except Exception:\n    ok = False\n"
    "sys.exit(0 if ok else 3)"
)
class PreflightError(RuntimeError):
    """Some node is not ready; the message lists every problem of every node."""


def _port_open(address: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


def check_image(cluster: Cluster, host: Host, image: str, registry: Registry) -> list[str]:
    from docker.errors import DockerException, ImageNotFound

    if not image:  # matrix.parse refuses a docker cluster without one; nothing to ask
        return []
    try:
        docker_for(cluster, host, registry).images.get(image)
    except ImageNotFound:
        return [f"image {image} is not present (docker load or docker pull it on this node)"]
    except DockerException as exc:
        return [f"docker cannot be asked for image {image}: {exc}"]
    return []


def check_module(sweep: Sweep, cluster: Cluster, host: Host, registry: Registry) -> list[str]:
    """The server module is importable in every rank environment (its flags: the "flags"
    check, :func:`read_server_flags`)."""
    python = node_python(cluster)
    try:
        envs = rank_envs(sweep, cluster, host)
    except ValueError as exc:  # a placeholder of an environment value that cannot be filled
        return [str(exc)]
    for env in envs:
        argv = with_env(env, [python, "-c", _IMPORTABLE, cluster.server_module])
        try:
            res = host_for(cluster, host, registry).run(argv, 180)
        except HostError as exc:
            raise type(exc)(hide_secrets(str(exc), env)) from None
        where = " in the ranks' environment" if env else ""
        if "PYTHONPATH" in env:
            where += f" (PYTHONPATH={env['PYTHONPATH']})"
        if res.exit_status == serverflags.NOT_IMPORTABLE:
            return [f"server module {cluster.server_module} is not importable by {python}{where}"]
        if not res.ok:
            stderr = hide_secrets(res.stderr.strip()[:200], env)
            return [f"{python} cannot run (exit {res.exit_status}): {stderr}"]
    return []


def check_paths(cluster: Cluster, host: Host, sweep: Sweep, registry: Registry) -> list[str]:
    from pytest_ppsweep.cluster.docker_launcher import device_host_path

    wanted = [("model path", sweep.model_path)] if sweep.model_path else []
    wanted += [("device", device_host_path(d)) for d in sweep.devices]
    if not wanted:
        return []
    # one round trip: print the index of every missing path
    script = "; ".join(
        f"[ -e {shlex.quote(path)} ] || echo {i}" for i, (_what, path) in enumerate(wanted)
    )
    res = host_for(cluster, host, registry).run(["sh", "-c", script + "; true"], 60)
    missing = {int(x) for x in res.stdout.split() if x.isdigit()}
    return [
        f"{what} {path} does not exist" for i, (what, path) in enumerate(wanted) if i in missing
    ]


def check_gpus(cluster: Cluster, host: Host, registry: Registry) -> list[str]:
    if not cluster.nvidia_smi:
        return []
    res = host_for(cluster, host, registry).run(smi_command(cluster, host.address, APPS_QUERY), 60)
    if not res.ok:
        return [f"nvidia-smi failed (exit {res.exit_status}): {res.stderr.strip()[:200]}"]
    apps = [line.strip() for line in res.stdout.splitlines() if line.strip()]
    if not apps:
        return []
    per_pid: dict[str, tuple[str, int]] = {}  # pid -> (name, GPUs it holds)
    for line in apps:
        pid, name = ([c.strip() for c in line.split(",")] + ["?", "?"])[:2]
        per_pid[pid] = (name, per_pid.get(pid, (name, 0))[1] + 1)
    shown = "; ".join(f"pid {pid} {name} on {n} GPU(s)" for pid, (name, n) in per_pid.items())
    return [f"GPUs are not idle: {len(apps)} compute process(es): {shown}"]


REAP_HINT = (
    "a server left from an earlier run? stop it, or rerun with --ppsweep-reap to remove the "
    "ranks earlier runs left"
)


NOT_OURS_HINT = (
    "not a rank this user's earlier runs left, so not one --ppsweep-reap removes: another "
    "user's sweep or another server; wait for it, or use other ports"
)


def _ports_of(cluster: Cluster, rank0: bool) -> list[tuple[str, int]]:
    ports = [("HTTP port", cluster.port)]
    if rank0:
        ports.append(("rendezvous port", cluster.dist_init_port))
    return ports


def _remote_owner(cluster: Cluster, host: Host, port: int, registry: Registry) -> str:
    # best effort: `ss -ltnp` names the process where the node has it and lets us see it
    script = f"ss -Hltnp 'sport = :{port}' 2>/dev/null | head -n 3; true"
    try:
        res = host_for(cluster, host, registry).run(["sh", "-c", script], 30)
    except HostError:
        return ""
    users = re.findall(r'\("([^"]+)",pid=(\d+)', res.stdout)
    return ", ".join(f"pid {pid} ({name})" for name, pid in users)


def check_ports(cluster: Cluster, host: Host, rank0: bool, registry: Registry) -> list[str]:
    problems = []
    for what, port in _ports_of(cluster, rank0):
        if _port_open(host.address, port):
            owner = _remote_owner(cluster, host, port, registry)
            held = f" by {owner}" if owner else ""
            problems.append(f"{what} {port} is already in use{held} ({REAP_HINT})")
    return problems


def check_local_ports(cluster: Cluster, host: Host, rank0: bool) -> list[str]:
    """This machine: the listening process is read from /proc (else a connect tells)."""
    problems = []
    for what, port in _ports_of(cluster, rank0):
        found = listeners(port, host.address)
        if found:
            owners = "; ".join(dict.fromkeys(item.describe() for item in found))
            # --ppsweep-reap is advised only for what it may remove: this user's ranks
            hint = REAP_HINT if any(item.reapable for item in found) else NOT_OURS_HINT
            problems.append(f"{what} {port} is already in use by {owners} ({hint})")
        elif _port_open(host.address, port, timeout=0.5):
            problems.append(f"{what} {port} is already in use ({REAP_HINT})")
    return problems


FLAGS_TIMEOUT_S = 300.0  # importing a real engine (torch, ...) on a busy node


def read_server_flags(sweep: Sweep, cluster: Cluster, registry: Registry) -> serverflags.FlagsRead:
    """The server's own argument list, read by its parser where the engine runs (the backend's
    ``run_engine``: rank 0's interpreter, environment, image and mounts on node 0), once per
    engine in a run (``registry.once``: clusters of one image share it). A node that cannot be
    asked gives a read that says why (``unchecked``)."""
    backend = backend_of(cluster)
    where = backend.engine_where(sweep)
    try:
        spec = rank_specs(sweep, cluster, _first_fitting(sweep, cluster))[0]
    except ValueError as exc:  # a placeholder that cannot be filled: the module check says so
        return serverflags.FlagsRead(where, unchecked=str(exc))
    python = spec.argv[0]
    key = ("server-flags", backend.engine_id(sweep), cluster.server_module, python,
           spec.env.get("PYTHONPATH", ""))

    def read() -> serverflags.FlagsRead:
        argv = serverflags.probe_argv(python, cluster.server_module, sweep.engine)
        try:
            res = backend.run_engine(sweep, argv, spec.env, registry, FLAGS_TIMEOUT_S)
        except HostError as exc:
            return serverflags.FlagsRead(where, unchecked=hide_secrets(str(exc), spec.env))
        return serverflags.read_back(cluster.server_module, python, where, res.exit_status,
                                     res.stdout, hide_secrets(res.stderr, spec.env))

    return registry.once(key, read)


def _first_fitting(sweep: Sweep, cluster: Cluster) -> Config:
    return next((c for c in sweep.configs if cluster.fits(c)), sweep.configs[0])


def check_flags(sweep: Sweep, cluster: Cluster, registry: Registry) -> list[str]:
    """The sweep's server flags, ``[axes]`` keys and enumerated values against the server's
    parser (:func:`read_server_flags`); a parser that could not be reached is not a problem here
    (the node's other checks say why: its connection, its image, Pyxis)."""
    return read_server_flags(sweep, cluster, registry).problems(sweep)


def _pyxis(cluster: Cluster) -> list[str]:

    return check_pyxis(cluster)


def _pyxis_image(cluster: Cluster, host: Host, registry: Registry) -> list[str]:
    return [p.split(": ", 1)[1] for p in import_image(cluster, [host.name], registry)]


def resources(sweep: Sweep, cluster: Cluster, registry: Registry) -> tuple[list[str], list[str]]:
    """What each rank gets on each node (report lines), and the problems where it is less
    than the sweep asks (``Backend.resources``: an allocation's nodes; nothing elsewhere)."""
    return backend_of(cluster).resources(sweep, registry,
                                         lambda address: smi_command(cluster, address))


# what each check a backend names does (backend.NodeCheck): (sweep, cluster, host, registry,
# rank0) → problems
CHECKS: Mapping[NodeCheck, Callable[[Sweep, Cluster, Host, Registry, bool], list[str]]] = {
    "module": lambda s, c, h, r, rank0: check_module(s, c, h, r),
    "image": lambda s, c, h, r, rank0: check_image(c, h, s.image, r),
    "flags": lambda s, c, h, r, rank0: check_flags(s, c, r),
    "pyxis": lambda s, c, h, r, rank0: _pyxis(c),
    "pyxis_image": lambda s, c, h, r, rank0: _pyxis_image(c, h, r),
    "paths": lambda s, c, h, r, rank0: check_paths(c, h, s, r),
    "gpus": lambda s, c, h, r, rank0: check_gpus(c, h, r),
    "ports": lambda s, c, h, r, rank0: check_ports(c, h, rank0, r),
    "local_ports": lambda s, c, h, r, rank0: check_local_ports(c, h, rank0),
}


def _check_node(sweep: Sweep, cluster: Cluster, host: Host, registry: Registry) -> list[str]:
    def strip(exc: HostError) -> str:
        text = str(exc)
        return text.split(": ", 1)[1] if text.startswith(f"host {host.name}") else text

    rank0 = host == cluster.rank0()
    problems: list[str] = []
    for name in backend_of(cluster).node_checks(rank0):
        if name == "flags" and problems:
            continue  # the engine cannot start there (module, image): its parser neither
        one = partial(CHECKS[name], sweep, cluster, host, registry, rank0)
        try:
            problems += one()
        except HostConnectionError as exc:
            return [*problems, strip(exc)]  # the node cannot be asked anything else
        except HostError as exc:
            problems.append(strip(exc))
    return problems


def check(sweep: Sweep, cluster: Cluster, registry: Registry | None = None) -> list[str]:
    """Every problem of every node, ``"<node> (<address>): <problem>"``; [] when all are ready."""
    hosts = cluster.hosts
    with temporary(registry) as reg:
        per_node = on_all(hosts, lambda h: _check_node(sweep, cluster, h, reg))
    return [
        f"{h.name} ({h.address}): {p}"
        for h, problems in zip(hosts, per_node, strict=True)
        for p in problems
    ]


OFFLINE = "offline check"  # what a problem of the dry run's offline flag check starts with
EMULATOR_PACKAGE = "pytest_ppsweep.sim"  # the emulator ships with the plugin: its parser is here


def dry_run_flags(sweep: Sweep, cluster: Cluster, registry: Registry) -> tuple[list[str], str]:
    """The dry run's flag check, which opens no connection. Where the engine runs on this
    machine (``Backend.engine_here``), or is the emulator (the same package as here), its own
    parser is run here; elsewhere (over SSH, in a Slurm step) the flags are checked offline
    against the engine version's flag list kept in the project (serverflags.captured). Returns
    the problems (each names file, key, expected and found) and the dry run's line: which
    check was made, against what, and where the preflight checks them again. Never silently
    skipped."""
    backend = backend_of(cluster)
    name = f"cluster {cluster.name!r}: server flags"
    later = f"; the preflight checks them {backend.flags_where}"
    module = cluster.server_module
    here = backend.engine_here
    if module.startswith(EMULATOR_PACKAGE) and not here:  # the emulator's parser, run here
        cluster = replace(cluster, kind="local", launcher="process", python=sys.executable,
                          settings=None)
        here = True
    if here:
        read = read_server_flags(sweep, cluster, registry)
        host = cluster.rank0()
        problems = [f"{host.name} ({host.address}): {p}" for p in read.problems(sweep)]
        where = read.where if backend.engine_here else (
            "on this machine (the emulator the ranks run ships with this plugin: no "
            f"connection){later}")
        if read.flags is not None:
            return problems, (f"{name}, [axes] keys and choices checked against "
                              f"{read.flags.module}'s own argument parser {where}")
        if read.unchecked:
            return problems, f"{name} not checked by the dry run: {read.unchecked}{later}"
        return problems, f"{name} not checked: {read.problem}"
    kept = serverflags.captured(sweep.engine, module)
    if kept is None:
        return [], (f"{name} not checked by the dry run: it opens no connection, and no flag "
                    f"list of {sweep.engine}'s {module} is kept in the project "
                    f"(tools/capture_engine_flags.py captures one){later}")
    return [f"{OFFLINE}: {p}" for p in serverflags.check(sweep, kept.flags)], (
        f"{name}, [axes] keys and choices checked offline (no connection) against "
        f"{kept.describe()}{later}, against the version it runs")


def message(cluster: Cluster, problems: Sequence[str],
            outcome: str = "nothing was started") -> str:
    """One failure message for all problems, ending with what it means for the run (the
    dry run's offline flag check: no node, the list it checked against named)."""
    if problems and all(p.startswith(f"{OFFLINE}: ") for p in problems):
        return (f"the server flags of cluster {cluster.name!r} have {len(problems)} "
                f"problem(s), found by the {OFFLINE}; {outcome}:\n"
                + "\n".join(f"  - {p.split(': ', 1)[1]}" for p in problems))
    nodes = len({p.split(" (", 1)[0] for p in problems})
    return (
        f"preflight of cluster {cluster.name!r} found {len(problems)} problem(s) on {nodes} of "
        f"{len(cluster.hosts)} node(s); {outcome}:\n"
        + "\n".join(f"  - {p}" for p in problems)
    )


def require(sweep: Sweep, cluster: Cluster, registry: Registry | None = None) -> None:
    """Raise :class:`PreflightError` with every problem, if there is any."""
    problems = check(sweep, cluster, registry)
    if problems:
        raise PreflightError(message(cluster, problems))


# -- metadata -------------------------------------------------------------------------------


