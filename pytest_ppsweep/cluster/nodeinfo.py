"""What the nodes are: GPUs, driver, kernel, the server module's and SGLang's versions (in the
image on docker clusters), asked of every node at once and stored as ``metadata/nodes-*.json``;
also how to ask a node (its python, its nvidia-smi argv, its docker client).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pytest_ppsweep.cluster.backends import backend_of, host_for
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.gpus import (
    QUERY_ARGS,
    GpuMemory,
    SmiParseError,
    parse_query_gpu,
    split_nodes,
)
from pytest_ppsweep.cluster.power import (
    NVML_READ_SCRIPT,
    CounterRead,
    EnergyRead,
    PowerParseError,
    PowerSample,
    parse_counter_step,
    parse_nvml_reads,
)
from pytest_ppsweep.cluster.rankspec import local_path, rank_specs
from pytest_ppsweep.cluster.registry import Registry, temporary
from pytest_ppsweep.cluster.ssh import on_all
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.matrix.model import Cluster, Host, Sweep
from pytest_ppsweep.redact import is_secret_key, scrub

GPU_QUERY = (
    "--query-gpu=index,name,driver_version,memory.total",
    "--format=csv,noheader,nounits",
)
VERSIONS_SCRIPT = (
    "import importlib.metadata as m, json, sys\n"
    "def v(d):\n"
    "    try:\n        return m.version(d)\n"
    "    except m.PackageNotFoundError:\n        return None\n"
    "top = sys.argv[1].split('.')[0]\n"
    "dists = m.packages_distributions().get(top, [])\n"
    "print(json.dumps({sys.argv[2]: v(sys.argv[2]), 'server_module': sys.argv[1],\n"
    "    'server_module_dists': {d: v(d) for d in dists}, 'python': sys.version.split()[0]}))"
)


def node_python(cluster: Cluster) -> str:
    """The interpreter the ranks run: ``~`` and ``$VARS`` expanded as the rank command does."""
    return local_path(cluster, cluster.python) or sys.executable


def rank_envs(sweep: Sweep, cluster: Cluster, host: Host) -> list[dict[str, str]]:
    """The environments a rank on ``host`` gets (``[env]``, the cluster's, each layout's, with
    its placeholders filled), one per distinct value over the layouts that fit ``cluster``."""
    rank = cluster.hosts.index(host)
    envs: list[dict[str, str]] = []
    for config in sweep.configs:
        if cluster.fits(config):
            env = dict(rank_specs(sweep, cluster, config)[rank].env)
            if env not in envs:
                envs.append(env)
    return envs or [{}]


def hide_secrets(text: str, env: Mapping[str, str]) -> str:
    """``text`` with the value of every secret-looking variable of ``env`` scrubbed."""
    for key, value in env.items():
        if is_secret_key(key):
            text = scrub(text, value)
    return text


def smi_command(cluster: Cluster, address: str, extra: Sequence[str] = ()) -> list[str]:
    """The nvidia-smi command line of the node at ``address`` (``{hosts}`` is that node alone),
    behind ``env`` with the emulator's ``PPSWEEP_SIM_*`` variables of the cluster: the emulator's
    shim reads the state its ranks publish."""
    python = node_python(cluster)
    env = [f"{k}={v}" for k, v in sorted(cluster.env.items()) if k.startswith("PPSWEEP_SIM_")]
    return (
        (["env", *env] if env else [])
        + [a.format(host=address, hosts=address, python=python) for a in cluster.nvidia_smi]
        + list(extra)
    )


def docker_for(cluster: Cluster, host: Host, registry: Registry) -> Any:
    """The registry's docker client of one node (over SSH, or this machine's daemon)."""
    return backend_of(cluster).docker_client(host, registry)


def _gpus(cluster: Cluster, host: Host, registry: Registry) -> list[dict[str, Any]]:
    if not cluster.nvidia_smi:
        return []
    res = host_for(cluster, host, registry).run(smi_command(cluster, host.address, GPU_QUERY), 60)
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


def _image_facts(cluster: Cluster, host: Host, image: str, registry: Registry) -> dict[str, Any]:
    """The image as the node's dockerd has it (id, digests, created) and that daemon's version."""
    from docker.errors import DockerException

    client = docker_for(cluster, host, registry)
    try:
        img = client.images.get(image)
        return {"image_id": img.id, "image_digests": list(img.attrs.get("RepoDigests") or []),
                "image_created": img.attrs.get("Created"),
                "docker_server_version": client.version().get("Version")}
    except DockerException as exc:
        return {"error": str(exc)[:300]}


def _versions(sweep: Sweep, cluster: Cluster, host: Host, registry: Registry) -> dict[str, Any]:
    """The server module's and the engine's versions where the node's rank runs (its interpreter,
    environment; in the image with the ranks' mounts on container kinds)."""
    rank = cluster.hosts.index(host)
    config = next((c for c in sweep.configs if cluster.fits(c)), sweep.configs[0])
    try:
        spec = rank_specs(sweep, cluster, config)[rank]  # where the ranks find the module
    except ValueError:
        return {"error": "the ranks' environment cannot be filled in"}
    argv = [spec.argv[0], "-c", VERSIONS_SCRIPT, cluster.server_module,
            engine_of(config.engine).version_distribution]
    try:
        res = backend_of(cluster).run_engine(sweep, argv, spec.env, registry, 120, node=host)
    except HostError as exc:
        raise type(exc)(hide_secrets(str(exc), spec.env)) from None
    try:
        parsed: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
        return parsed
    except (ValueError, IndexError):
        return {"error": f"exit {res.exit_status}: "
                         f"{hide_secrets(res.stderr.strip()[:300], spec.env)}"}


def _node_metadata(
    sweep: Sweep, cluster: Cluster, host: Host, registry: Registry
) -> dict[str, Any]:
    node: dict[str, Any] = {"name": host.name, "address": host.address}
    try:
        res = host_for(cluster, host, registry).run(["uname", "-n", "-r"], 60)
        parts = res.stdout.split()
        node["hostname"], node["kernel"] = [*parts, "", ""][:2]
        node["gpus"] = _gpus(cluster, host, registry)
        drivers = sorted({g["driver_version"] for g in node["gpus"]})
        node["driver_version"] = drivers[0] if len(drivers) == 1 else drivers
        if backend_of(cluster).in_containers:
            node.update(_image_facts(cluster, host, sweep.image, registry))
        node.update(_versions(sweep, cluster, host, registry))
    except HostError as exc:
        node["error"] = str(exc)
    return node


def metadata(sweep: Sweep, cluster: Cluster, registry: Registry | None = None) -> dict[str, Any]:
    """What the nodes are (all nodes asked at once); JSON-serialisable."""
    backend = backend_of(cluster)
    hosts = backend.nodes_to_ask()
    with temporary(registry) as reg:
        nodes = on_all(hosts, lambda h: _node_metadata(sweep, cluster, h, reg))
    return {
        "cluster": cluster.name,
        "kind": cluster.kind,
        "launcher": cluster.launcher,
        "image": sweep.image if backend.in_containers else None,
        "server_module": cluster.server_module,
        "nodes": nodes,
    }


def query_gpus(cluster: Cluster, registry: Registry) -> list[GpuMemory]:
    """nvidia-smi on every node at once: one call for a local cluster whose
    ``nvidia_smi`` takes ``{hosts}``, else one per node, concurrently."""
    if one_call(cluster):
        hosts = cluster.hosts
        argv = smi_command(cluster, ",".join(h.address for h in hosts), QUERY_ARGS)
        res = host_for(cluster, hosts[0], registry).run(argv, timeout=60)
        if not res.ok:
            raise HostError(
                f"hosts {', '.join(h.name for h in hosts)}: nvidia-smi exited "
                f"{res.exit_status}: {res.stderr.strip()}"
            )
        parts = split_nodes(res.stdout, [h.address for h in hosts])
        return [g for h in hosts for g in parse_query_gpu(parts[h.address], h.name)]

    def one(host_index: int) -> list[GpuMemory]:
        h = cluster.hosts[host_index]
        argv = smi_command(cluster, h.address, QUERY_ARGS)
        res = host_for(cluster, h, registry).run(argv, timeout=60)
        if not res.ok:
            raise HostError(
                f"host {h.name}: nvidia-smi exited {res.exit_status}: {res.stderr.strip()}"
            )
        return parse_query_gpu(res.stdout, h.name)

    with ThreadPoolExecutor(max_workers=len(cluster.hosts)) as pool:
        per_node = list(pool.map(one, range(len(cluster.hosts))))
    return [g for node in per_node for g in node]


def one_call(cluster: Cluster) -> bool:
    """Whether one nvidia-smi call answers for every node: a local cluster (its nodes are
    this machine) of several nodes whose ``nvidia_smi`` takes ``{hosts}``."""
    return backend_of(cluster).one_smi_call()


# The emulator's server module: its nodes' NVML read is its nvidia-smi shim's ``--nvml-energy``
# (sim/smi.py), as their nvidia-smi is the shim.
EMULATOR_MODULE = "pytest_ppsweep.sim"


def energy_command(cluster: Cluster, address: str) -> list[str]:
    """The NVML read of the node(s) at ``address`` (``a,b`` for several at once on the
    emulator): :data:`NVML_READ_SCRIPT` with the node's python, or on the emulator its
    nvidia-smi shim's ``--nvml-energy`` (the emulator's model of the counter)."""
    if cluster.server_module == EMULATOR_MODULE:
        return smi_command(cluster, address, ["--nvml-energy"])
    return [node_python(cluster), "-c", NVML_READ_SCRIPT]


def _problem(host: Host, error: str) -> str:
    """``<node>: NVML read failed: <the error's last line>`` (a traceback's last line says it)."""
    last = error.strip().splitlines()[-1][:200] if error.strip() else "no output"
    return f"{host.name}: NVML read failed: {last}"


def read_energy(cluster: Cluster, registry: Registry) -> EnergyRead:
    """Every node's energy counters at once, through the cluster's own node access (as the GPU
    snapshots are taken): one call for an emulated local cluster of several nodes, else one
    per node, concurrently. A node that cannot read NVML (no nvidia-ml-py, no GPU, a driver
    without the counter) is a problem named with its node, never an error of the round."""
    if not cluster.nvidia_smi:
        return EnergyRead((), (), None, (), no_gpus=True)
    texts: list[tuple[Host, str | None, str]] = []
    if one_call(cluster) and cluster.server_module == EMULATOR_MODULE:
        hosts = cluster.hosts
        argv = energy_command(cluster, ",".join(h.address for h in hosts))
        try:
            res = host_for(cluster, hosts[0], registry).run(argv, 60)
        except HostError as exc:
            return EnergyRead((), (), None, (_problem(hosts[0], str(exc)),))
        if not res.ok:
            return EnergyRead((), (), None, (_problem(hosts[0], res.stderr or res.stdout),))
        try:
            parts = split_nodes(res.stdout, [h.address for h in hosts])
        except SmiParseError as exc:
            return EnergyRead((), (), None, (_problem(hosts[0], str(exc)),))
        texts = [(h, parts[h.address], "") for h in hosts]
    else:
        def one(h: Host) -> tuple[Host, str | None, str]:
            try:
                res = host_for(cluster, h, registry).run(energy_command(cluster, h.address), 60)
            except HostError as exc:
                return h, None, str(exc)
            return (h, res.stdout, "") if res.ok else (h, None, res.stderr or res.stdout)

        texts = on_all(list(cluster.hosts), one)
    reads: list[CounterRead] = []
    samples: list[PowerSample] = []
    problems: list[str] = []
    steps: list[float] = []
    scale = 1.0
    for host, text, error in texts:
        if text is None:
            problems.append(_problem(host, error))
            continue
        try:
            r, s = parse_nvml_reads(host.name, text)
        except PowerParseError as exc:
            problems.append(str(exc))
            continue
        reads += r
        samples += s
        step, scale = parse_counter_step(text)
        if step is not None:
            steps.append(step)
    return EnergyRead(tuple(reads), tuple(samples), max(steps) if steps else None,
                      tuple(problems), time_scale=scale)
