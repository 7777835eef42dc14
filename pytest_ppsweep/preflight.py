"""Before the first boot: is every node ready? And what are the nodes (run metadata)?

:func:`check` asks every node at once and returns every problem of every node, so one failure
message lists them all and nothing is booted until they are fixed:

* the server can start: the image is present (docker) or ``python -m <server_module>`` is
  importable (process) by the ranks' interpreter in the ranks' environment;
* the model path and every device of ``[sweep] devices`` exist on the node;
* the GPUs are idle (no compute process in ``nvidia-smi``; the emulator's shim stands in);
* nothing answers on the HTTP port (nor on the rendezvous port of node 0) yet.

:func:`metadata` describes the nodes for ``reports/<run>/metadata/``: host names, GPU names and
driver from nvidia-smi, and, as the server's environment reports them, the image id and the
SGLang version.

Local clusters (loopback "nodes" on this machine) only check that the server module imports:
the emulator reads no model and the GPU shim's state is shared with other sessions.
"""

from __future__ import annotations

import json
import shlex
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pytest_ppsweep.backends import host_for
from pytest_ppsweep.hosts import HostError
from pytest_ppsweep.launch import local_path, rank_specs
from pytest_ppsweep.matrix import Cluster, Host, Sweep
from pytest_ppsweep.probe import REDACTED, is_secret_key
from pytest_ppsweep.remote import HostConnectionError, SshSettings, on_all

__all__ = ["PreflightError", "check", "message", "metadata", "require"]

APPS_QUERY = ("--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader")
GPU_QUERY = (
    "--query-gpu=index,name,driver_version,memory.total",
    "--format=csv,noheader,nounits",
)
_IMPORTABLE = (
    "import importlib.util, sys\n"
    "try:\n    ok = importlib.util.find_spec(sys.argv[1]) is not None\n"
    "except Exception:\n    ok = False\n"
    "sys.exit(0 if ok else 3)"
)
_VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "def v(d):\n"
    "    try:\n        return m.version(d)\n"
    "    except m.PackageNotFoundError:\n        return None\n"
    "top = sys.argv[1].split('.')[0]\n"
    "dists = m.packages_distributions().get(top, [])\n"
    "print(json.dumps({'sglang': v('sglang'), 'server_module': sys.argv[1],\n"
    "    'server_module_dists': {d: v(d) for d in dists}, 'python': sys.version.split()[0]}))"
)


class PreflightError(RuntimeError):
    """Some node is not ready; the message lists every problem of every node."""


def _python(cluster: Cluster) -> str:
    # The interpreter the ranks run: ``~`` and ``$VARS`` expanded as launch.rank_specs does.
    return local_path(cluster, cluster.python) or sys.executable


def _smi(cluster: Cluster, host: Host, extra: Sequence[str]) -> list[str]:
    python = _python(cluster)
    return [a.format(host=host.address, python=python) for a in cluster.nvidia_smi] + list(extra)


def _port_open(address: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


def _docker_client(cluster: Cluster, host: Host) -> Any:
    from pytest_ppsweep.docker_launch import docker_client

    return docker_client(host.name, host.address, SshSettings.from_cluster(cluster))


def _check_image(cluster: Cluster, host: Host, image: str) -> list[str]:
    from docker.errors import DockerException, ImageNotFound

    if not image:
        return ["no image given ([sweep] image or --ppsweep-image)"]
    try:
        _docker_client(cluster, host).images.get(image)
    except ImageNotFound:
        return [f"image {image} is not present (docker load or docker pull it on this node)"]
    except DockerException as exc:
        return [f"docker cannot be asked for image {image}: {exc}"]
    return []


def _rank_envs(sweep: Sweep, cluster: Cluster, host: Host) -> list[dict[str, str]]:
    """The environments a rank on ``host`` gets (``[env]``, the cluster's, each layout's, with
    its placeholders filled), one per distinct value over the layouts that fit ``cluster``."""
    rank = cluster.hosts.index(host)
    envs: list[dict[str, str]] = []
    for config in sweep.configs:
        if config.pp * config.tp == cluster.gpus:
            env = dict(rank_specs(sweep, cluster, config)[rank].env)
            if env not in envs:
                envs.append(env)
    return envs or [{}]


def _with_env(env: dict[str, str], argv: list[str]) -> list[str]:
    # `env K=V … argv`: what the launchers put around a rank (ssh_launch.start_script too).
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv] if env else argv


def _check_module(sweep: Sweep, cluster: Cluster, host: Host) -> list[str]:
    python = _python(cluster)
    try:
        envs = _rank_envs(sweep, cluster, host)
    except ValueError as exc:  # a placeholder of an environment value that cannot be filled
        return [str(exc)]
    for env in envs:
        argv = _with_env(env, [python, "-c", _IMPORTABLE, cluster.server_module])
        try:
            res = host_for(cluster, host).run(argv, 120)
        except HostError as exc:
            raise type(exc)(_hide_secrets(str(exc), env)) from None
        where = " in the ranks' environment" if env else ""
        if "PYTHONPATH" in env:
            where += f" (PYTHONPATH={env['PYTHONPATH']})"
        if res.exit_status == 3:
            return [f"server module {cluster.server_module} is not importable by {python}{where}"]
        if not res.ok:
            stderr = _hide_secrets(res.stderr.strip()[:200], env)
            return [f"{python} cannot run (exit {res.exit_status}): {stderr}"]
    return []


def _hide_secrets(text: str, env: dict[str, str]) -> str:
    for key, value in env.items():
        if value and is_secret_key(key):
            text = text.replace(value, REDACTED)
    return text


def _check_paths(cluster: Cluster, host: Host, sweep: Sweep) -> list[str]:
    from pytest_ppsweep.docker_launch import device_host_path

    wanted = [("model path", sweep.model_path)] if sweep.model_path else []
    wanted += [("device", device_host_path(d)) for d in sweep.devices]
    if not wanted:
        return []
    # one round trip: print the index of every missing path
    script = "; ".join(
        f"[ -e {shlex.quote(path)} ] || echo {i}" for i, (_what, path) in enumerate(wanted)
    )
    res = host_for(cluster, host).run(["sh", "-c", script + "; true"], 60)
    missing = {int(x) for x in res.stdout.split() if x.isdigit()}
    return [
        f"{what} {path} does not exist" for i, (what, path) in enumerate(wanted) if i in missing
    ]


def _check_gpus(cluster: Cluster, host: Host) -> list[str]:
    if not cluster.nvidia_smi:
        return []
    res = host_for(cluster, host).run(_smi(cluster, host, APPS_QUERY), 60)
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


def _check_ports(cluster: Cluster, host: Host, rank0: bool) -> list[str]:
    ports = [("HTTP port", cluster.port)]
    if rank0:
        ports.append(("rendezvous port", cluster.dist_init_port))
    return [
        f"{what} {port} is already in use (a server left from an earlier run?)"
        for what, port in ports
        if _port_open(host.address, port)
    ]


def _check_node(sweep: Sweep, cluster: Cluster, host: Host) -> list[str]:
    def strip(exc: HostError) -> str:
        text = str(exc)
        return text.split(": ", 1)[1] if text.startswith(f"host {host.name}") else text

    checks: list[Callable[[], list[str]]]
    if cluster.kind == "local":
        checks = [lambda: _check_module(sweep, cluster, host)]
    else:
        checks = [
            (
                (lambda: _check_image(cluster, host, sweep.image))
                if cluster.launcher == "docker"
                else (lambda: _check_module(sweep, cluster, host))
            ),
            lambda: _check_paths(cluster, host, sweep),
            lambda: _check_gpus(cluster, host),
            lambda: _check_ports(cluster, host, host == cluster.rank0()),
        ]
    problems: list[str] = []
    for one in checks:
        try:
            problems += one()
        except HostConnectionError as exc:
            return [*problems, strip(exc)]  # the node cannot be asked anything else
        except HostError as exc:
            problems.append(strip(exc))
    return problems


def check(sweep: Sweep, cluster: Cluster) -> list[str]:
    """Every problem of every node, ``"<node> (<address>): <problem>"``; [] when all are ready."""
    hosts = cluster.hosts[:1] if cluster.kind == "local" else cluster.hosts
    per_node = on_all(hosts, lambda h: _check_node(sweep, cluster, h))
    return [
        f"{h.name} ({h.address}): {p}"
        for h, problems in zip(hosts, per_node, strict=True)
        for p in problems
    ]


def message(cluster: Cluster, problems: Sequence[str]) -> str:
    """One failure message for all problems."""
    nodes = len({p.split(" (", 1)[0] for p in problems})
    return (
        f"preflight of cluster {cluster.name!r} found {len(problems)} problem(s) on {nodes} of "
        f"{len(cluster.hosts)} node(s); nothing was started:\n"
        + "\n".join(f"  - {p}" for p in problems)
    )


def require(sweep: Sweep, cluster: Cluster) -> None:
    """Raise :class:`PreflightError` with every problem, if there is any."""
    problems = check(sweep, cluster)
    if problems:
        raise PreflightError(message(cluster, problems))


# -- metadata -------------------------------------------------------------------------------


def _gpus(cluster: Cluster, host: Host) -> list[dict[str, Any]]:
    if not cluster.nvidia_smi:
        return []
    res = host_for(cluster, host).run(_smi(cluster, host, GPU_QUERY), 60)
    if not res.ok:
        return []
    gpus = []
    for line in res.stdout.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) == 4 and cols[0].isdigit():
            gpus.append(
                {
                    "index": int(cols[0]),
                    "name": cols[1],
                    "driver_version": cols[2],
                    "memory_total_mib": (
                        int(float(cols[3])) if cols[3].replace(".", "").isdigit() else None
                    ),
                }
            )
    return gpus


def _versions_in_container(cluster: Cluster, host: Host, image: str) -> dict[str, Any]:
    from docker.errors import DockerException

    client = _docker_client(cluster, host)
    out: dict[str, Any] = {}
    try:
        img = client.images.get(image)
        out["image_id"] = img.id
        out["image_digests"] = list(img.attrs.get("RepoDigests") or [])
        out["image_created"] = img.attrs.get("Created")
        raw = client.containers.run(
            image,
            ["-c", _VERSIONS, cluster.server_module],
            entrypoint=[cluster.python or "python3"],
            remove=True,
            network_mode="none",
            labels={"ppsweep.metadata": "1"},
        )
        out.update(json.loads(raw.decode().strip().splitlines()[-1]))
        out["docker_server_version"] = client.version().get("Version")
    except (DockerException, ValueError, IndexError) as exc:
        out["error"] = str(exc)[:300]
    return out


def _versions_on_host(sweep: Sweep, cluster: Cluster, host: Host) -> dict[str, Any]:
    try:
        env = _rank_envs(sweep, cluster, host)[0]  # where the ranks find the server module
    except ValueError:
        env = {}
    argv = _with_env(env, [_python(cluster), "-c", _VERSIONS, cluster.server_module])
    try:
        res = host_for(cluster, host).run(argv, 120)
    except HostError as exc:
        raise type(exc)(_hide_secrets(str(exc), env)) from None
    try:
        parsed: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
        return parsed
    except (ValueError, IndexError):
        return {"error": f"exit {res.exit_status}: {_hide_secrets(res.stderr.strip()[:300], env)}"}


def _node_metadata(sweep: Sweep, cluster: Cluster, host: Host) -> dict[str, Any]:
    node: dict[str, Any] = {"name": host.name, "address": host.address}
    try:
        res = host_for(cluster, host).run(["uname", "-n", "-r"], 60)
        parts = res.stdout.split()
        node["hostname"], node["kernel"] = [*parts, "", ""][:2]
        node["gpus"] = _gpus(cluster, host)
        drivers = sorted({g["driver_version"] for g in node["gpus"]})
        node["driver_version"] = drivers[0] if len(drivers) == 1 else drivers
        if cluster.kind == "ssh" and cluster.launcher == "docker":
            node.update(_versions_in_container(cluster, host, sweep.image))
        else:
            node.update(_versions_on_host(sweep, cluster, host))
    except HostError as exc:
        node["error"] = str(exc)
    return node


def metadata(sweep: Sweep, cluster: Cluster) -> dict[str, Any]:
    """What the nodes are (all nodes asked at once); JSON-serialisable."""
    hosts = cluster.hosts[:1] if cluster.kind == "local" else cluster.hosts
    nodes = on_all(hosts, lambda h: _node_metadata(sweep, cluster, h))
    return {
        "cluster": cluster.name,
        "kind": cluster.kind,
        "launcher": cluster.launcher,
        "image": sweep.image if cluster.launcher == "docker" else None,
        "server_module": cluster.server_module,
        "nodes": nodes,
    }
