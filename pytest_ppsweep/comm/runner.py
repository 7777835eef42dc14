"""Run the all-reduce microbenchmark on every TP domain of a layout, with its service stopped.

Each node of a domain gets one process started by the cluster's own launcher (a local process,
a detached process over SSH, or a container of the server's image with the server's env), so the
benchmark runs where and how the server runs. What it runs:

* ``tool = "torch"``: ``allreduce_worker.py`` (torch only) with the node's python: the file of
  this package on a local cluster; copied to ``/tmp/ppsweep-comm/<run>/`` on an ssh node and,
  on docker clusters, bind-mounted at the same path into the container. On the emulator
  (``server_module = "pytest_ppsweep.sim"``) the emulator's ``python -m pytest_ppsweep.sim.comm``
  takes the same arguments and answers from its profile.
* ``tool = "nccl-tests"``: ``all_reduce_perf`` on the domain's first node (``-g`` GPUs on one
  node, or under ``[comm] mpirun`` across nodes); its table is parsed.

Output lands in the run folder as it is produced: ``comm/<config>/<domain>/node<r>.log`` (each
node's output, streamed by the launcher), ``comm/<config>/topo-node<r>.txt`` (``nvidia-smi topo
-m``), ``comm/<config>/smi-q-node<r>.txt`` (``nvidia-smi -q`` of each node of a domain, through
:mod:`pytest_ppsweep.redact`), one ``comm.csv`` row per domain × size and ``comm_summary.csv``
(the §9.2 table) rewritten after each domain. A wrong sum, a hang (no progress for
``timeout_s``: the worker's own bounded wait, and this module's outer one) or an init failure
raises :class:`CommFailed` naming node and rank.
"""

from __future__ import annotations

import base64
import csv
import io
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.cluster.backends import backend_of, host_for, launcher_for
from pytest_ppsweep.cluster.base import HostError, RankHandle
from pytest_ppsweep.cluster.labels import rank_labels
from pytest_ppsweep.cluster.nodeinfo import hide_secrets, smi_command
from pytest_ppsweep.cluster.rankspec import RankSpec, local_path, rank_specs
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.comm.domains import Domain, tp_domains
from pytest_ppsweep.comm.ncclperf import NcclPerfError, parse_all_reduce_perf
from pytest_ppsweep.comm.records import read_output
from pytest_ppsweep.comm.table import SUMMARY_COLUMNS, summary_rows
from pytest_ppsweep.comm.topo import GpuTopology, TopoError, parse_topo
from pytest_ppsweep.folder.runfolder import (
    COMM_COMMANDS_TXT,
    COMM_CSV,
    COMM_SUMMARY_CSV,
    RunStore,
    node_log_name,
    topo_name,
)
from pytest_ppsweep.matrix.commspec import CommSpec, size_label
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep
from pytest_ppsweep.redact import redact

__all__ = ["COMM_COLUMNS", "WORKER", "CommFailed", "DomainRun", "run_comm", "save_smi_q",
           "worker_argv"]

WORKER = Path(__file__).resolve().parent / "allreduce_worker.py"
REMOTE_DIR = "/tmp/ppsweep-comm"
SIM_MODULE = "pytest_ppsweep.sim"
COMM_COLUMNS = (
    "run_id", "config_id", "pp", "tp", "domain", "label", "nodes", "gpus", "stages", "tool",
    "backend", "world_size", "size_bytes", "time_us", "time_p50_us", "algbw_gbs", "busbw_gbs",
    "wrong",
    "simulated",
)
STARTUP_S = 120.0  # on top of timeout_s per phase: imports, container start


class CommFailed(AssertionError):
    """The benchmark of a domain failed; the message names the node and rank."""


@dataclass(frozen=True)
class DomainRun:
    """One domain's results, as written to comm.csv."""

    domain: Domain
    rows: list[dict[str, Any]]


Status = Callable[[str], None]


def worker_argv(spec: CommSpec, domain: Domain, cluster: Cluster, node_index: int,
                master_port: int, launcher: Sequence[str]) -> list[str]:
    """The worker's command line on the ``node_index``-th node of ``domain``."""
    head = cluster.hosts[domain.nodes[0]]
    return [
        *launcher,
        "--nnodes", str(len(domain.nodes)),
        "--node-rank", str(node_index),
        "--nproc-per-node", str(domain.nproc_per_node),
        "--devices", ",".join(map(str, domain.gpus)),
        "--node-names", ",".join(f"{cluster.hosts[n].name} ({cluster.hosts[n].address})"
                                 .replace(",", " ") for n in domain.nodes),
        "--master-addr", head.address,
        "--master-port", str(master_port),
        "--sizes", ",".join(map(str, spec.sizes)),
        "--warmup", str(spec.warmup_iters),
        "--iters", str(spec.iters),
        "--backend", spec.backend,
        "--timeout-s", f"{spec.timeout_s:g}",
    ]


def _python(cluster: Cluster) -> str:
    return local_path(cluster, cluster.python) or (
        sys.executable if backend_of(cluster).shares_files else "python3")


def _ship_worker(cluster: Cluster, registry: Registry, run_id: str, nodes: Sequence[int]) -> str:
    """Copy the worker to every node of an ssh cluster (base64 through the shell: any host that
    runs commands can take it); its path there."""
    rdir = f"{REMOTE_DIR}/{''.join(c if c.isalnum() or c in '-_.' else '_' for c in run_id)}"
    path = f"{rdir}/{WORKER.name}"
    payload = base64.b64encode(WORKER.read_bytes()).decode()
    script = (f"mkdir -p {shlex.quote(rdir)} && printf %s {payload} | base64 -d > "
              f"{shlex.quote(path)}.tmp && mv {shlex.quote(path)}.tmp {shlex.quote(path)}")
    for n in nodes:
        host = cluster.hosts[n]
        res = host_for(cluster, host, registry).run(["sh", "-c", script], timeout=60)
        if not res.ok:
            raise CommFailed(f"node {host.name} ({host.address}): could not copy the comm worker "
                             f"to {path}: {res.stderr.strip() or res.exit_status}")
    return path


def _smi_each(cluster: Cluster, nodes: Sequence[int], registry: Registry,
              extra: list[str]) -> list[tuple[int, str | None, str]]:
    """``nvidia-smi <extra>`` on each of ``nodes`` at once: (node, its output or None, the note
    that says why not)."""
    what = " ".join(["nvidia-smi", *extra])

    def one(n: int) -> tuple[int, str | None, str]:
        host = cluster.hosts[n]
        argv = smi_command(cluster, host.address, extra)
        try:
            res = host_for(cluster, host, registry).run(argv, timeout=60)
        except HostError as exc:
            return n, None, f"node {host.name}: {what}: {exc}"
        if not res.ok:
            return n, None, f"node {host.name}: {what} exited {res.exit_status}"
        return n, res.stdout, ""

    with ThreadPoolExecutor(max_workers=max(len(nodes), 1)) as pool:
        return list(pool.map(one, nodes))


def read_topologies(cluster: Cluster, nodes: Sequence[int], registry: Registry, out_dir: Path,
                    notes: list[str]) -> dict[int, GpuTopology]:
    """``nvidia-smi topo -m`` of each node where the cluster has nvidia-smi; saved beside the
    results. A node that cannot say is labelled from the cluster description only."""
    topos: dict[int, GpuTopology] = {}
    if not cluster.nvidia_smi:
        return topos
    for n, text, note in _smi_each(cluster, nodes, registry, ["topo", "-m"]):
        if text is None:
            notes.append(note)
            continue
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / topo_name(n)).write_text(text, encoding="utf-8")
        try:
            topos[n] = parse_topo(text, f"node {cluster.hosts[n].name}: nvidia-smi topo -m")
        except TopoError as exc:
            notes.append(str(exc))
    return topos


def save_smi_q(cluster: Cluster, nodes: Sequence[int], registry: Registry, out_dir: Path,
               notes: list[str]) -> list[Path]:
    """``nvidia-smi -q`` of each node, saved beside the results as ``smi-q-node<r>.txt`` (secret
    -looking text and the cluster env's secret values hidden); a node that cannot say is a note.
    """
    if not cluster.nvidia_smi:
        return []
    saved = []
    for n, text, note in _smi_each(cluster, nodes, registry, ["-q"]):
        if text is None:
            notes.append(note)
            continue
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"smi-q-node{n}.txt"
        path.write_text(hide_secrets(str(redact(text)), cluster.env), encoding="utf-8")
        saved.append(path)
    return saved


def _wait(handles: Sequence[RankHandle], deadline: float, logs: Sequence[Path],
          total: int, status: Status) -> bool:
    """Until every process ended (True) or the deadline passed (False)."""
    shown = -1
    while time.monotonic() < deadline:
        done = [h.poll() is not None for h in handles]
        seen = logs[0].read_text(errors="replace").count('"event": "result"') if logs[0].is_file() \
            else 0
        if seen != shown:
            status(f"sizes {seen}/{total}")
            shown = seen
        if all(done):
            return True
        if any(h.poll() not in (None, 0) for h in handles):
            # one node failed: give the others a moment to report their side, then stop
            end = min(deadline, time.monotonic() + 5.0)
            while time.monotonic() < end and not all(h.poll() is not None for h in handles):
                time.sleep(0.1)
            return all(h.poll() is not None for h in handles)
        time.sleep(0.1)
    return False


def _node_specs(sweep: Sweep, cluster: Cluster, config: Config, domain: Domain,
                argvs: Sequence[Sequence[str]]) -> list[RankSpec]:
    """The server's environment of each node (NCCL_*/GLOO_* as the service had), new argv."""
    server = rank_specs(sweep, cluster, config)
    return [replace(server[n], argv=tuple(argv)) for n, argv in zip(domain.nodes, argvs,
                                                                    strict=True)]


def _run_processes(sweep: Sweep, cluster: Cluster, config: Config, domain: Domain,
                   specs: Sequence[RankSpec], out_dir: Path, store: RunStore, registry: Registry,
                   timeout: float, status: Status) -> tuple[list[Path], bool]:
    # the launcher of the domain's nodes: a Slurm step spans exactly them
    launcher = launcher_for(replace(cluster, hosts=tuple(cluster.hosts[n] for n in domain.nodes)),
                            sweep, registry)
    logs = [out_dir / node_log_name(n) for n in domain.nodes]
    for path in logs:
        path.unlink(missing_ok=True)
    (out_dir / COMM_COMMANDS_TXT).write_text(
        "\n".join(f"node{s.node_rank} ({s.host}): {s.command_line()}" for s in specs) + "\n",
        encoding="utf-8")
    handles: list[RankHandle] = []
    try:
        for spec, log in zip(specs, logs, strict=True):
            labels = rank_labels(store.run_id, cluster.name, f"{config.id}.comm", spec.node_rank)
            handle = launcher.start(spec, log, labels)
            registry.track(handle)
            handles.append(handle)
        finished = _wait(handles, time.monotonic() + timeout, logs,
                         len(sweep.comm.sizes) if sweep.comm else 0, status)
    finally:
        for handle in handles:
            handle.stop(grace_s=2.0)
            registry.untrack(handle)
    return logs, finished


def _where(cluster: Cluster, domain: Domain) -> list[str]:
    """The node of every global rank of the domain, ``601 (174.1.60.1)``."""
    return [f"{cluster.hosts[n].name} ({cluster.hosts[n].address})"
            for n in domain.nodes for _ in domain.gpus]


def run_domain(sweep: Sweep, spec: CommSpec, cluster: Cluster, config: Config, domain: Domain,
               store: RunStore, registry: Registry, status: Status) -> DomainRun:
    """Benchmark one domain; its rows are in comm.csv when this returns; CommFailed if not."""
    out_dir = store.comm_dir(config.id) / domain.name
    out_dir.mkdir(parents=True, exist_ok=True)
    world = domain.tp
    port = spec.master_port or cluster.dist_init_port + 1
    timeout = STARTUP_S + spec.timeout_s * (2 + len(spec.sizes))
    simulated = cluster.server_module == SIM_MODULE
    if spec.tool == "nccl-tests" and not simulated:
        return _run_nccl_tests(sweep, spec, cluster, config, domain, store, registry, status,
                               out_dir, timeout)
    python = _python(cluster)
    if simulated:
        launch = [python, "-m", "pytest_ppsweep.sim.comm"]
    elif backend_of(cluster).shares_files:
        launch = [python, str(WORKER)]
    else:
        launch = [python, _ship_worker(cluster, registry, store.run_id, domain.nodes)]
        if backend_of(cluster).in_containers:
            remote = launch[1]
            cluster = replace(cluster, mounts=(*cluster.mounts, f"{remote}:{remote}:ro"))
    argvs = [worker_argv(spec, domain, cluster, i, port, launch) for i in range(len(domain.nodes))]
    specs = _node_specs(sweep, cluster, config, domain, argvs)
    logs, finished = _run_processes(sweep, cluster, config, domain, specs, out_dir, store,
                                    registry, timeout, status)
    out = read_output(logs)
    where = _where(cluster, domain)
    problems = out.problems(world, where)
    if not finished and not out.errors:
        problems.insert(0, f"hang (bounded wait): no end within {timeout:.0f} s")
    if not problems and len(out.results) != len(spec.sizes):
        problems.append(f"rank 0 ({where[0]}) reported {len(out.results)} of "
                        f"{len(spec.sizes)} sizes")
    rows = [_row(store, config, domain, "torch" if not simulated else "emulator", r,
                 simulated) for r in out.results]
    _append(store, rows)
    if problems:
        raise CommFailed(_failure(config, domain, cluster, problems, logs))
    return DomainRun(domain, rows)


def _run_nccl_tests(sweep: Sweep, spec: CommSpec, cluster: Cluster, config: Config,
                    domain: Domain, store: RunStore, registry: Registry, status: Status,
                    out_dir: Path, timeout: float) -> DomainRun:
    low, high = spec.sizes[0], spec.sizes[-1]
    args = ["-b", str(low), "-e", str(high), "-f", "2", "-w", str(spec.warmup_iters),
            "-n", str(spec.iters), "-c", "1"]
    head = cluster.hosts[domain.nodes[0]]
    if len(domain.nodes) == 1:
        argv = [spec.all_reduce_perf, *args, "-g", str(domain.nproc_per_node)]
    elif spec.mpirun:
        hosts = ",".join(f"{cluster.hosts[n].address}:{domain.nproc_per_node}"
                         for n in domain.nodes)
        prefix = [a.format(np=domain.tp, hosts=hosts, nproc_per_node=domain.nproc_per_node)
                  for a in spec.mpirun]
        argv = [*prefix, spec.all_reduce_perf, *args, "-g", "1"]
    else:
        raise CommFailed(
            f"{config.id} {domain.name}: nccl-tests across {len(domain.nodes)} nodes needs "
            f"[comm] mpirun (e.g. [\"mpirun\", \"-np\", \"{{np}}\", \"-H\", \"{{hosts}}\"]) in "
            f"{sweep.path}"
        )
    server = rank_specs(sweep, cluster, config)[domain.nodes[0]]
    env = {**server.env, "CUDA_VISIBLE_DEVICES": ",".join(map(str, domain.gpus))}
    node_spec = RankSpec(domain.nodes[0], head.name, head.address, tuple(argv), env)
    one = replace(domain, nodes=domain.nodes[:1])
    logs, finished = _run_processes(sweep, cluster, config, one, [node_spec], out_dir, store,
                                    registry, timeout, status)
    text = logs[0].read_text(errors="replace") if logs[0].is_file() else ""
    try:
        perf = parse_all_reduce_perf(text, f"{logs[0]}")
    except NcclPerfError as exc:
        problem = str(exc) if finished else f"hang (bounded wait): no end within {timeout:.0f} s"
        raise CommFailed(_failure(config, domain, cluster, [problem], logs)) from None
    results = [{"size_bytes": p.size_bytes, "time_us": p.time_us, "algbw_gbs": p.algbw_gbs,
                "busbw_gbs": p.busbw_gbs, "wrong": p.wrong or 0, "world_size": domain.tp,
                "backend": "nccl"} for p in perf]
    rows = [_row(store, config, domain, "nccl-tests", r, False) for r in results]
    _append(store, rows)
    bad = [p for p in perf if p.wrong]
    if bad:
        raise CommFailed(_failure(config, domain, cluster, [
            f"wrong sum: {p.wrong} wrong elements at {size_label(p.size_bytes)} "
            f"(all_reduce_perf on {head.name} ({head.address}))" for p in bad], logs))
    return DomainRun(domain, rows)


def _row(store: RunStore, config: Config, domain: Domain, tool: str, r: dict[str, Any],
         simulated: bool) -> dict[str, Any]:
    return {
        "run_id": store.run_id, "config_id": config.id,
        **{k: v for k, v in config.deployment.columns().items() if k != "ep"},
        "domain": domain.name, "label": domain.label, "nodes": len(domain.nodes),
        "gpus": len(domain.gpus), "stages": " ".join(map(str, domain.stages)), "tool": tool,
        "backend": r.get("backend", ""), "world_size": r.get("world_size", domain.tp),
        "size_bytes": r["size_bytes"], "time_us": r["time_us"],
        "time_p50_us": r.get("time_p50_us", ""), "algbw_gbs": r["algbw_gbs"],
        "busbw_gbs": r["busbw_gbs"], "wrong": r.get("wrong", 0), "simulated": simulated,
    }


def _append(store: RunStore, rows: list[dict[str, Any]]) -> None:
    """comm.csv gains the domain's rows; comm_summary.csv (§9.2) is rebuilt from it."""
    path = store.dir / COMM_CSV
    with store.locked():
        new = not path.is_file()
        with path.open("a", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=COMM_COLUMNS)
            if new:
                writer.writeheader()
            writer.writerows(rows)
        with path.open(newline="", encoding="utf-8") as fh:
            every = list(csv.DictReader(fh))
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(summary_rows(every))
        (store.dir / COMM_SUMMARY_CSV).write_text(out.getvalue(), encoding="utf-8")


def _failure(config: Config, domain: Domain, cluster: Cluster, problems: list[str],
             logs: Sequence[Path]) -> str:
    tails = []
    for path in logs:
        if path.is_file():
            lines = path.read_text(errors="replace").splitlines()[-8:]
            tails.append(f"--- {path.name} (last {len(lines)} lines)\n" + "\n".join(lines))
    return (f"{config.id}: all-reduce benchmark of {domain.name} ({domain.label}; "
            f"{domain.where(cluster)}) failed:\n" + "\n".join(f"  {p}" for p in problems)
            + ("\n" + "\n".join(tails) if tails else ""))


def run_comm(sweep: Sweep, cluster: Cluster, config: Config, store: RunStore,
             registry: Registry, status: Status | None = None,
             spec: CommSpec | None = None) -> tuple[list[DomainRun], list[str]]:
    """Every distinct TP domain of ``config``, one after the other; (results, notes)."""
    spec = spec or sweep.comm or CommSpec()
    if spec is not sweep.comm:
        sweep = replace(sweep, comm=spec)
    say = status or (lambda text: None)
    notes: list[str] = []
    # the nodes of the TP groups that stay on one node (their island label needs topo -m)
    tp = config.deployment.serve_group.tp
    single = list(range(len(cluster.hosts))) if 1 < tp <= cluster.gpus_per_node else []
    topos = read_topologies(cluster, single, registry, store.comm_dir(config.id), notes)
    domains = tp_domains(config, cluster, topos)
    save_smi_q(cluster, sorted({n for d in domains for n in d.nodes}), registry,
               store.comm_dir(config.id), notes)
    runs = []
    for domain in domains:

        def tell(text: str, d: Domain = domain) -> None:
            say(f"{d.name} ({d.label}) {text}")

        runs.append(run_domain(sweep, spec, cluster, config, domain, store, registry, tell))
    return runs, notes
