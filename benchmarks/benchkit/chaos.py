"""The chaos matrix: faults × backends → detected / verdict / leftovers / seconds to detect.

Each scenario boots a real layout through :class:`pytest_ppsweep.run.sweeprun.SweepRun` (what the
plugin's fixtures call), injects one fault, and records what the plugin did about it:

* **detected**: the plugin raised the failure the fault calls for (``BootFailed``,
  ``LayoutDead``, a round that is not N/N, a topology problem, a refused preflight, an error that
  names the run folder) — or, for a fault that must *not* fail a layout (a slow start, a dropped
  SSH connection the log stream resumes), it stayed quiet and the layout measured N/N;
* **verdict**: what it was, compared with :data:`EXPECTED`;
* **evidence**: the fault's own words in the failure or the run folder (the NCCL line, the
  exit code, ``No space left on device``, the port's owner…);
* **leftovers**: after teardown, every host looked at: this run's labelled processes on this
  machine (``reap.find_local``), on the namespace hosts every labelled process and container
  (``support.remote.leftovers``);
* **seconds**: real seconds from the fault to the plugin's failure (``None`` where there is no
  single moment, e.g. a boot fault set at launch: there it is the seconds from launch).

Faults that do not end a layout share one boot (:data:`SHARED`): the slow start, the wrong
topology and the failed requests are set together at launch; the SSH drop and the full disk
are injected into a running layout, which then takes one layout-ending fault. Backends:
``emulator`` (local ranks of ``python -m pytest_ppsweep.sim``, tiny profile, 2 nodes),
``sglang`` (real SGLang 0.5.23 on CPU, PP2), ``ssh`` (emulator ranks over SSH on the namespace
hosts) and ``docker`` (emulator containers through the docker SDK over SSH).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_ppsweep.cluster import preflight
from pytest_ppsweep.cluster.reap import find_local
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.pointchecks import topology_problems
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.sweeprun import SweepRun
from pytest_ppsweep.service.liveness import LayoutDead
from pytest_ppsweep.service.readiness import BootFailed

# -- the matrix ------------------------------------------------------------------------------

EMULATOR_FAULTS = (
    "nccl_init", "oom_load", "custom_ar_graph", "watchdog_hang", "never_join", "slow_start",
    "wrong_topology", "fail_requests", "crash_mid_bench",
)  # fmt: skip
OTHER_FAULTS = (
    "sigkill", "sigstop", "die_mid_round", "ssh_drop", "dockerd_restart", "disk_full",
    "port_taken",
)  # fmt: skip
FAULTS = EMULATOR_FAULTS + OTHER_FAULTS
BACKENDS = ("emulator", "sglang", "ssh", "docker")

# What each fault is, as the table's first column says it.
DESCRIBE = {
    "nccl_init": "emulator: NCCL init fails (all ranks)",
    "oom_load": "emulator: CUDA OOM while loading weights",
    "custom_ar_graph": "emulator: custom all-reduce fails in CUDA-graph capture",
    "watchdog_hang": "emulator: warmup hangs, scheduler watchdog fires",
    "never_join": "emulator: rank 1 never joins the rendezvous",
    "slow_start": "emulator: ranks start 10 emulated s late",
    "wrong_topology": "emulator: /server_info reports another tp/pp",
    "fail_requests": "emulator: 25 % of requests fail (HTTP 500 / error in stream)",
    "crash_mid_bench": "emulator: rank 1 dies after 3 requests",
    "sigkill": "SIGKILL of rank 1's process group between rounds",
    "sigstop": "SIGSTOP of rank 1's process group (a hang)",
    "die_mid_round": "SIGKILL of rank 1 once a round's first request completed",
    "ssh_drop": "every SSH connection to node 1's host cut while its log streams",
    "dockerd_restart": "node 1's dockerd stopped and restarted during the layout",
    "disk_full": "the run folder (a 4 MiB tmpfs) full during a round",
    "port_taken": "rank 0's HTTP port held by another process",
}
# The verdict each fault must get. "pass": the layout must boot and measure N/N regardless.
EXPECTED = {
    "nccl_init": "boot failed",
    "oom_load": "boot failed",
    "custom_ar_graph": "boot failed",
    "watchdog_hang": "boot failed",
    "never_join": "boot failed",
    "slow_start": "pass",
    "wrong_topology": "wrong topology",
    "fail_requests": "not N/N",
    "crash_mid_bench": "layout dead",
    "sigkill": "layout dead",
    "sigstop": "layout dead",
    "die_mid_round": "layout dead",
    "ssh_drop": "pass",
    "dockerd_restart": "layout dead",
    "disk_full": "run folder error",
    "port_taken": "preflight refused",
}
# Words that must be in the failure (or, for "pass", in the run folder's evidence).
EVIDENCE = {
    "nccl_init": r"NCCL error",
    "oom_load": r"OutOfMemoryError",
    # on node 1 only: the failure is named on node 1 with its own line, never on node 0's line
    # about it ("Rank 1 scheduler is dead", Gloo's "Connection closed by peer")
    "custom_ar_graph": r"boot failed: (fatal line in node1's log|node1 exited)[^|]*"
                       r"(Capture cuda graph failed|custom_all_reduce)",
    "watchdog_hang": r"[Ww]atchdog",
    "never_join": r"DistStoreError|waiting for clients",
    "slow_start": r"healthy",
    "wrong_topology": r"tp|pp",
    "fail_requests": r"failed",
    "crash_mid_bench": r"node 1 .*(rank exited with code|illegal memory access)",
    "sigkill": r"rank exited with code -9|code 137",
    "sigstop": r"/health not answering",
    "die_mid_round": r"rank exited with code .*aborted|aborted",
    "ssh_drop": r"N/N; the run folder's node1\.log equals the node's .*: True",
    # the first death seen may be node 0 (its rank exits when node 1's container goes) or node 1
    "dockerd_restart": r"node [01] \(|[Rr]ank 1 ",
    "disk_full": r"No space left on device",
    "port_taken": r"in use|held by|listening",
}
SIM_FAULT_VALUE = {
    "nccl_init": "nccl_init",
    "oom_load": "oom_load",
    "custom_ar_graph": "custom_ar_graph@rank=1",
    "watchdog_hang": "watchdog_hang",
    "never_join": "never_join=1",
    "slow_start": "slow_start=10",
    "wrong_topology": "wrong_topology",
    "fail_requests": "fail_requests=0.25",
    "crash_mid_bench": "crash_mid_bench=3@rank=1",
}
# Faults that need a boot of their own (they end it at boot), and the groups that share one.
BOOT_FAULTS = ("nccl_init", "oom_load", "custom_ar_graph", "watchdog_hang", "never_join")
LAYOUT_ENDING = ("crash_mid_bench", "sigkill", "sigstop", "die_mid_round", "dockerd_restart")
# fail_requests is set at launch but fails requests of every round: a boot of its own
LAUNCH_SHARED = ("slow_start", "wrong_topology")
RUNNING_SHARED = ("ssh_drop", "disk_full")


def not_applicable(fault: str, backend: str) -> str | None:
    """Why ``fault`` has no meaning on ``backend`` (the table's n/a), or None."""
    if fault in EMULATOR_FAULTS and backend == "sglang":
        return "an emulator fault (PPSWEEP_SIM_FAULTS): real SGLang has no such hook"
    if fault == "ssh_drop" and backend in ("emulator", "sglang"):
        return "local ranks: no SSH connection"
    if fault == "dockerd_restart" and backend != "docker":
        return "no docker daemon on this backend"
    return None


def plan(backend: str, faults: Sequence[str]) -> list[tuple[str, ...]]:
    """The boots that cover ``faults`` on ``backend``: one per boot fault, one port check (no
    boot), and boots that share: launch-time faults + running faults + one layout-ending fault."""
    todo = [f for f in faults if not_applicable(f, backend) is None]
    boots: list[tuple[str, ...]] = [(f,) for f in todo if f in (*BOOT_FAULTS, "fail_requests")]
    if "port_taken" in todo:
        boots.append(("port_taken",))
    shared = [f for f in todo if f in LAUNCH_SHARED + RUNNING_SHARED]
    # an ending fault set at launch (crash_mid_bench) would fire during the shared rounds
    ending = [f for f in todo if f in LAYOUT_ENDING and f not in SIM_FAULT_VALUE]
    boots += [(f,) for f in todo if f in LAYOUT_ENDING and f in SIM_FAULT_VALUE]
    if not ending and shared:
        boots.append(tuple(shared))
    for i, end in enumerate(ending):
        boots.append((*shared, end) if i == 0 else (end,))
    return boots


@dataclass
class Result:
    """One cell of the table."""

    fault: str
    backend: str
    verdict: str = ""
    detected: bool = False
    seconds: float | None = None
    evidence: str = ""  # the failure's first lines (or what showed the pass)
    leftovers: list[str] = field(default_factory=list)
    boot: str = ""  # the faults that shared this result's boot
    note: str = ""
    teardown: str = ""  # what teardown raised (it must not raise)

    @property
    def expected(self) -> str:
        return EXPECTED[self.fault]

    @property
    def evidence_ok(self) -> bool:
        return re.search(EVIDENCE[self.fault], self.evidence) is not None

    @property
    def ok(self) -> bool:
        return (self.detected and self.verdict == self.expected and self.evidence_ok
                and not self.leftovers and not self.teardown)

    def cell(self) -> str:
        """``ok: detected · boot failed · 0 left · 1.1 s`` (MISS when anything is off)."""
        secs = "—" if self.seconds is None else f"{self.seconds:.1f} s"
        left = "0 left" if not self.leftovers else f"{len(self.leftovers)} LEFT"
        if self.teardown:
            left += ", teardown raised"
        mark = "ok" if self.ok else "MISS"
        seen = "detected" if self.detected else "NOT detected"
        return f"{mark}: {seen} · {self.verdict or '?'} · {left} · {secs}"


# -- backends --------------------------------------------------------------------------------


class Backend:
    """How to make a sweep for a backend, reach its ranks and see what is left on its hosts."""

    name = ""
    nodes = 2

    def __init__(self, work: Path) -> None:
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self._ports = itertools.count(0)

    def sweep_text(self, sim_faults: str, port: int, long_round: bool = False) -> str:
        """The sweep file; ``long_round``: a round that lasts ~1 s or more (a fault must land
        inside it), at a lower time scale on the emulator."""
        raise NotImplementedError

    def next_port(self) -> int:
        return self.base_port + 2 * next(self._ports)

    base_port = 44000

    def rank_groups(self, booted: Booted, node_rank: int) -> list[int]:
        """Process group ids (root PID namespace) of ``node_rank``'s rank."""
        pid = booted.service.procs[node_rank].pid  # type: ignore[attr-defined]
        return [os.getpgid(pid)]

    def leftovers(self, run_id: str) -> list[str]:
        return [f"process {pid} of run {run_id}" for pid in find_local(run_id)]

    @contextlib.contextmanager
    def port_held(self, address: str, port: int) -> Iterator[str]:
        """A foreign process listening on ``address:port``; yields its description."""
        code = (f"import socket,sys,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,"
                f"socket.SO_REUSEADDR,1); s.bind(({address!r},{port})); s.listen(); "
                "print('up',flush=True); time.sleep(600)")
        with _holder([sys.executable, "-c", code]) as proc:
            yield f"pid {proc.pid}"

    def drop_ssh(self, node_rank: int) -> int:
        raise NotImplementedError

    def rank_log_bytes(self, booted: Booted, node_rank: int) -> bytes:
        """The rank's log as its node has it (what the run folder's copy must equal)."""
        raise NotImplementedError

    def restart_dockerd(self, node_rank: int) -> Callable[[], None]:
        raise NotImplementedError


@contextlib.contextmanager
def _holder(argv: list[str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "up":
            raise RuntimeError(f"port holder did not start: {argv}")
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


EMU_HEAD = """
[sweep]
name = "chaos-{backend}"
model_path = "{model}"
boot_timeout_s = 60
health_stall_s = 10  # the SIGSTOP cell: its stall ends the layout in 10 s, not the default 30
spread_rule = "warn"
{extra_sweep}
[server]
chunked_prefill_size = 4096
watchdog_timeout = 30

[[configs]]
pp = 2
tp = 2
{config_env}
[workload]
input_len = {input_len}
output_len = 1
concurrency = [2, 4]
num_requests = {num_requests}
repeats = 1
vocab_size = 1000
request_timeout_s = 30
round_timeout_s = 60
"""


LONG_SCALE = 20  # a round of 128 × 4,096 tokens: ~1.3 s real on the tiny profile


def _config_extra(sim_faults: str) -> str:
    """The layout's env (the emulator's faults) and, for a rank that never joins, a short
    rendezvous timeout (60 emulated s; the default 600 only makes the wait longer)."""
    out = f'env = {{ PPSWEEP_SIM_FAULTS = "{sim_faults}" }}\n' if sim_faults else ""
    if "never_join" in sim_faults:
        out += "server = { dist_timeout = 60 }\n"
    return out


def _sizes(long_round: bool) -> dict[str, int]:
    return {"input_len": 4096, "num_requests": 128} if long_round else {
        "input_len": 512, "num_requests": 8}


class Emulator(Backend):
    """Local emulator ranks on 127.0.46.x (two nodes of the tiny profile's 2 GPUs)."""

    name = "emulator"
    base_port = 44000
    net = "127.0.46"
    scale = 200

    def sweep_text(self, sim_faults: str, port: int, long_round: bool = False) -> str:
        env = _config_extra(sim_faults)
        hosts = ", ".join(f'"{self.net}.{i}"' for i in range(1, self.nodes + 1))
        scale = LONG_SCALE if long_round else self.scale
        return EMU_HEAD.format(backend=self.name, model=self.work, extra_sweep="",
                               config_env=env, **_sizes(long_round)) + f"""
[clusters.local]
kind = "local"
hosts = [{hosts}]
gpus_per_node = 2
server_module = "pytest_ppsweep.sim"
port = {port}
dist_init_port = {port + 1}
nvidia_smi = []
env = {{ PPSWEEP_SIM_TIME_SCALE = "{scale}", PPSWEEP_SIM_PROFILE = "tiny", \
PPSWEEP_SIM_STATE_DIR = "{self.work / 'simstate'}" }}
"""


class RealSglang(Backend):
    """Real SGLang 0.5.23 on CPU, PP2 on 127.0.46.21-22 (support.real.provision())."""

    name = "sglang"
    base_port = 44200

    def __init__(self, work: Path, prov: Any) -> None:
        super().__init__(work)
        self.prov = prov

    def sweep_text(self, sim_faults: str, port: int, long_round: bool = False) -> str:
        from support.real import sweep_toml

        text = sweep_toml(self.prov, port=port, dist_port=port + 1, mark=f"chaos-{port}",
                          configs="[[configs]]\npp = 2\ntp = 1\n", concurrency=[2, 4],
                          num_requests=48 if long_round else 8, repeats=1,
                          baseline="pp2-tp1")
        text = text.replace('hosts = ["127.0.6.1", "127.0.6.2", "127.0.6.3", "127.0.6.4"]',
                            'hosts = ["127.0.46.21", "127.0.46.22"]')
        assert "127.0.46.21" in text, "test_matrix/cpu.toml's hosts changed"
        return text.replace('name = "cpu-sglang"', 'name = "chaos-sglang"')


class Remote(Backend):
    """Emulator ranks on the namespace hosts h601-h602 over SSH (``launcher``: process or
    docker). ``hosts``: support.remote.TestHosts."""

    base_port = 44300

    def __init__(self, work: Path, hosts: Any, launcher: str) -> None:
        super().__init__(work)
        self.hosts = hosts
        self.launcher = launcher
        self.name = "ssh" if launcher == "process" else "docker"

    def sweep_text(self, sim_faults: str, port: int, long_round: bool = False) -> str:
        from support.remote import cluster_toml

        env = _config_extra(sim_faults)
        state = self.work / "simstate"
        state.mkdir(exist_ok=True)
        table = cluster_toml(self.hosts, name="ns", launcher=self.launcher, state=state,
                             scale=LONG_SCALE if long_round else 200, port=port)
        # the tiny profile (2 GPUs per node) on two of the four hosts
        table = table.replace('PPSWEEP_SIM_PROFILE = "kimi-k3-6000d"',
                              'PPSWEEP_SIM_PROFILE = "tiny"')
        table = table.replace("gpus_per_node = 8", "gpus_per_node = 2")
        two = ", ".join(f'{{ name = "{n}", address = "{a}" }}' for n, a in self.hosts.hosts[:2])
        table = table.replace(f"hosts = {self.hosts.hosts_toml()}", f"hosts = [{two}]")
        return EMU_HEAD.format(backend=self.name, model=self.work, config_env=env,
                               extra_sweep=self._sweep_keys(), **_sizes(long_round)
                               ) + "\n" + table

    def _container_rank_group(self, booted: Booted, node_rank: int) -> int:
        """The process group (root PID namespace) of the rank inside node ``node_rank``'s
        container: the child of its init (``docker run --init``), found through the host's
        dockerd (its State.Pid is this machine's: dockerd shares the root PID namespace)."""
        import docker

        proc: Any = booted.service.procs[node_rank]
        client = docker.DockerClient(base_url=self.hosts.sockets[self._netns(node_rank)],
                                     version="1.41")
        try:
            init = int(client.containers.get(proc.name).attrs["State"]["Pid"])
        finally:
            client.close()
        children = [int(c) for t in Path(f"/proc/{init}/task").iterdir()
                    for c in (t / "children").read_text().split()]
        if not children:
            raise RuntimeError(f"docker: the init {init} of {proc.name} has no child")
        return os.getpgid(children[0])

    def _sweep_keys(self) -> str:
        from support.remote import IMAGE

        return 'cluster = "ns"\n' + (f'image = "{IMAGE}"\n' if self.launcher == "docker" else "")

    def _procs(self, run_id: str, node_rank: int) -> list[Any]:
        from support.remote import rank_processes

        return [p for p in rank_processes(self.hosts) if f"--node-rank {node_rank} " in p.cmd + " "]

    def rank_groups(self, booted: Booted, node_rank: int) -> list[int]:
        if self.launcher == "docker":
            return [self._container_rank_group(booted, node_rank)]
        groups = sorted({p.pgid for p in self._procs("", node_rank)})
        if not groups:
            raise RuntimeError(f"{self.name}: no process of node {node_rank} found")
        return groups

    def leftovers(self, run_id: str) -> list[str]:
        from support.remote import leftovers

        return list(leftovers(self.hosts))

    def _netns(self, node_rank: int) -> str:
        return str(self.hosts.hosts[node_rank][0])

    @contextlib.contextmanager
    def port_held(self, address: str, port: int) -> Iterator[str]:
        code = (f"import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,"
                f"socket.SO_REUSEADDR,1); s.bind(({address!r},{port})); s.listen(); "
                "print('up',flush=True); time.sleep(600)")
        argv = ["ip", "netns", "exec", self._netns(0), sys.executable, "-c", code]
        with _holder(argv) as proc:
            yield f"pid {proc.pid} in {self._netns(0)}"

    def drop_ssh(self, node_rank: int) -> int:
        """SIGKILL every sshd session process of node ``node_rank``'s host (not its listener,
        PID 1 of the host): every SSH connection to it drops at once."""
        inode = os.stat(f"/run/netns/{self._netns(node_rank)}").st_ino
        killed = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.stat(entry / "ns" / "net").st_ino != inode:
                    continue
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                status = (entry / "status").read_text()
            except OSError:
                continue
            nspid = re.search(r"^NSpid:\s+(.*)$", status, re.M)
            if not cmd.startswith("sshd:") or nspid is None or nspid.group(1).split()[-1] == "1":
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
        return killed

    def rank_log_bytes(self, booted: Booted, node_rank: int) -> bytes:
        proc: Any = booted.service.procs[node_rank]
        if self.launcher == "process":
            # the namespace hosts share this machine's file system
            return Path(proc.remote_log).read_bytes()
        import docker

        client = docker.DockerClient(base_url=self.hosts.sockets[self._netns(node_rank)],
                                     version="1.41")
        try:
            return bytes(client.containers.get(proc.name).logs())
        finally:
            client.close()

    def restart_dockerd(self, node_rank: int) -> Callable[[], None]:
        """Stop node ``node_rank``'s dockerd (SIGTERM: it stops its containers); returns the
        restart (scripts/provision_test_hosts.sh --docker, idempotent, starts what is down)."""
        from support.remote import run_script

        ns = self._netns(node_rank)
        pid_file = self.hosts.root / "docker" / ns / "dockerd.bgpid"
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)

        def restart() -> None:
            run_script("provision_test_hosts.sh", "--docker", timeout=300)

        return restart


# -- running one boot --------------------------------------------------------------------------


class _Tmpfs:
    """A small tmpfs as the run folder (root only): the disk-full fault fills it."""

    def __init__(self, path: Path, size: str = "4m") -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "chaos", str(path)],
                       check=True)

    def fill(self) -> Path:
        filler = self.path / "filler"
        # unbuffered: what did not fit raises here, not again when the file is closed
        with filler.open("wb", buffering=0) as fh:
            for size in (65536, 1):
                with contextlib.suppress(OSError):
                    while True:
                        fh.write(b"\0" * size)
        return filler

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)


def _first_lines(text: str, n: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[:n])


def _wait(event: threading.Event, timeout: float) -> bool:
    return event.wait(timeout)


def run_boot(backend: Backend, faults: Sequence[str], say: Callable[[str], None] = print
             ) -> list[Result]:
    """One boot of ``backend`` with ``faults`` (a group of :func:`plan`); a Result each."""
    port = backend.next_port()
    label = "+".join(faults)
    results = {f: Result(f, backend.name, boot=label) for f in faults}
    sim = ",".join(SIM_FAULT_VALUE[f] for f in faults if f in SIM_FAULT_VALUE)
    folder = backend.work / f"{backend.name}-{label}-{port}"
    folder.mkdir(parents=True)
    matrix = folder / "ppsweep.toml"
    matrix.write_text(backend.sweep_text(sim, port, long_round="die_mid_round" in faults))
    sweep = load(matrix)
    tmpfs = _Tmpfs(folder / "reports") if "disk_full" in faults else None
    store = RunStore(folder / "reports", f"chaos-{backend.name}-{port}-{time.time_ns()}")
    run = SweepRun(sweep, sweep.pool(None), store)
    config = sweep.configs[0]
    cluster = run.cluster_for(config)
    t0 = time.monotonic()
    say(f"[{backend.name}] {label}: boot on port {port}")
    try:
        if faults == ("port_taken",):
            _port_taken(backend, sweep, cluster, results["port_taken"])
            return list(results.values())
        try:
            booted = run.boot(config)
        except BootFailed as exc:
            for r in results.values():
                r.verdict, r.evidence = "boot failed", _first_lines(str(exc), 8)
                r.detected = r.expected == "boot failed"
                r.seconds = time.monotonic() - t0
            return list(results.values())
        try:
            _after_boot(backend, run, booted, faults, results, t0, tmpfs, say)
        finally:
            try:
                run.teardown(booted)
            except Exception as exc:  # the plugin's teardown must not raise: a cell, not a crash
                for r in results.values():
                    r.teardown = f"{type(exc).__name__}: {exc}"
    finally:
        run.close()
        if tmpfs is not None:
            tmpfs.unmount()
        left = _settled_leftovers(backend, store.run_id)
        for r in results.values():
            r.leftovers = left
        for r in results.values():
            say(f"[{backend.name}] {r.fault}: {r.cell()} — {r.evidence[:160]}")
    return list(results.values())


def _settled_leftovers(backend: Backend, run_id: str, within_s: float = 10.0) -> list[str]:
    # A rank's exit is seen by the kernel a moment after its group was killed: what is still
    # there after ``within_s`` is a leftover.
    deadline = time.monotonic() + within_s
    while True:
        left = backend.leftovers(run_id)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _port_taken(backend: Backend, sweep: Any, cluster: Any, r: Result) -> None:
    address = cluster.hosts[0].address
    with backend.port_held(address, cluster.port) as who:
        t = time.monotonic()
        problems = preflight.check(sweep, cluster)
        r.seconds = time.monotonic() - t
    hits = [p for p in problems if str(cluster.port) in p]
    r.detected = bool(hits)
    r.verdict = "preflight refused" if hits else ("pass" if not problems else "other")
    r.evidence = _first_lines("\n".join(hits or problems), 2)
    r.note = f"holder {who}"


def _after_boot(backend: Backend, run: SweepRun, booted: Booted, faults: Sequence[str],
                results: dict[str, Result], t0: float, tmpfs: _Tmpfs | None,
                say: Callable[[str], None]) -> None:
    try:
        _steps(backend, run, booted, faults, results, t0, tmpfs, say)
    except Exception as exc:  # a scenario's own error is a cell of the table, not a crash
        for r in results.values():
            if not r.verdict:
                r.verdict = f"error: {type(exc).__name__}"
                r.evidence = _first_lines(str(exc), 2)


def _steps(backend: Backend, run: SweepRun, booted: Booted, faults: Sequence[str],
           results: dict[str, Result], t0: float, tmpfs: _Tmpfs | None,
           say: Callable[[str], None]) -> None:
    config = booted.service.config
    conc = run.sweep.workload.concurrency[0]
    boot_s = time.monotonic() - t0
    for fault in faults:
        r = results[fault]
        if fault == "slow_start":
            r.verdict, r.detected = "pass", True
            r.evidence = f"healthy after {boot_s:.1f} s real (10 emulated s late)"
        elif fault == "wrong_topology":
            server = run.sweep.server_args(config)
            problems = topology_problems(config, server, booted.topology, len(booted.cluster.hosts))
            r.detected = bool(problems)
            r.verdict = "wrong topology" if problems else "pass"
            r.evidence, r.seconds = _first_lines("\n".join(problems)), 0.0
    if "fail_requests" in faults:
        r = results["fail_requests"]
        t = time.monotonic()
        res = run.run_rounds(booted, conc)
        r.seconds = time.monotonic() - t
        bad = [x for x in res if x.completed < x.num_requests]
        r.detected = bool(bad)
        r.verdict = "not N/N" if bad else "pass"
        r.evidence = "; ".join(f"{x.completed}/{x.num_requests} completed, {x.failed} failed"
                               for x in res) + f" ({_error_kinds(run, booted, conc)})"
    if "ssh_drop" in faults:
        _ssh_drop(backend, run, booted, conc, results["ssh_drop"])
    if "disk_full" in faults:
        assert tmpfs is not None
        # C=4: a round whose raw file does not exist yet (rewriting C=2's frees its pages)
        _disk_full(run, booted, run.sweep.workload.concurrency[-1], tmpfs, results["disk_full"])
    for fault in faults:
        if fault in LAYOUT_ENDING:
            _layout_ending(backend, run, booted, conc, fault, results[fault], say)


def _rounds_or_death(run: SweepRun, booted: Booted, conc: int) -> tuple[str, str, float]:
    """Run the rounds of ``conc``: (verdict, evidence, monotonic time it ended)."""
    try:
        res = run.run_rounds(booted, conc)
    except LayoutDead as exc:
        return "layout dead", _first_lines(str(exc), 1), time.monotonic()
    except OSError as exc:
        return "run folder error", _first_lines(f"{type(exc).__name__}: {exc}"), time.monotonic()
    bad = [x for x in res if x.completed < x.num_requests]
    text = "; ".join(f"{x.completed}/{x.num_requests}" for x in res)
    if bad:
        text += f" ({_error_kinds(run, booted, conc)})"
    return ("not N/N" if bad else "pass"), f"rounds {text} N/N" if not bad else text, (
        time.monotonic())


def _error_kinds(run: SweepRun, booted: Booted, conc: int) -> str:
    """The failed requests' error kinds of the round's raw records (why it is not N/N)."""
    kinds: dict[str, int] = {}
    for raw in sorted((run.store.dir / "raw" / booted.service.config.id).glob(f"c{conc}-r*.jsonl")):
        for line in raw.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if not rec.get("ok"):
                    key = f"{rec.get('error_kind')}: {str(rec.get('error'))[:60]}"
                    kinds[key] = kinds.get(key, 0) + 1
    return ", ".join(f"{n}× {k}" for k, n in kinds.items()) or "no failed record on disk"


def _ssh_drop(backend: Backend, run: SweepRun, booted: Booted, conc: int, r: Result) -> None:
    """Cut every SSH connection to node 1's host while its log streams; the run folder's copy
    of node 1's log must catch up with the log on the node, byte for byte (nothing lost, nothing
    twice), with lines the rank wrote after the drop; then a round must measure N/N."""
    log = booted.service.log_path(1)
    at_drop = len(backend.rank_log_bytes(booted, 1))
    n = backend.drop_ssh(1)
    t = time.monotonic()
    r.note = f"{n} sshd session processes killed"
    # the rank writes a /health line every second (the watch probes it)
    _wait_until(lambda: len(backend.rank_log_bytes(booted, 1)) > at_drop + 200, 20.0)
    remote = backend.rank_log_bytes(booted, 1)
    caught_up = _wait_until(lambda: log.read_bytes()[:len(remote)] == remote, 30.0)
    r.seconds = time.monotonic() - t if caught_up else None
    verdict, evidence, _end = _rounds_or_death(run, booted, conc)
    lost = "log stream from" in log.read_text(errors="replace")
    alive = booted.look() is None
    r.verdict = verdict if alive else "layout dead"
    r.detected = alive and verdict == "pass" and caught_up and not lost
    r.evidence = (f"{evidence}; the run folder's node1.log equals the node's after the drop "
                  f"({len(remote) - at_drop} bytes written since): {caught_up}; "
                  f"'log stream lost': {lost}; layout alive: {alive}")


def _wait_until(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def _disk_full(run: SweepRun, booted: Booted, conc: int, tmpfs: _Tmpfs, r: Result) -> None:
    filler = tmpfs.fill()
    try:
        t = time.monotonic()
        verdict, evidence, end = _rounds_or_death(run, booted, conc)
    finally:
        filler.unlink()
    r.seconds = end - t
    r.verdict, r.evidence = verdict, evidence
    r.detected = verdict == "run folder error"
    alive = booted.look() is None
    r.note = f"layout alive after: {alive}"


def _layout_ending(backend: Backend, run: SweepRun, booted: Booted, conc: int, fault: str,
                   r: Result, say: Callable[[str], None]) -> None:
    died = booted.service.died
    if fault == "crash_mid_bench":
        verdict, evidence, end = _rounds_or_death(run, booted, conc)
        r.seconds = _since_log_end(booted, 1, end)
    elif fault == "die_mid_round":
        raw = run.store.dir / "raw" / booted.service.config.id / f"c{conc}-r1.jsonl"
        broke: list[float] = []

        def breaker() -> None:
            _wait_until(lambda: raw.exists() and bool(raw.read_text().strip()), 120)
            groups = backend.rank_groups(booted, 1)
            broke.append(time.monotonic())
            for g in groups:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(g, signal.SIGKILL)

        thread = threading.Thread(target=breaker, daemon=True)
        thread.start()
        verdict, evidence, end = _rounds_or_death(run, booted, conc)
        thread.join(10)
        r.seconds = end - broke[0] if broke else None
    elif fault == "dockerd_restart":
        t = time.monotonic()
        restart = backend.restart_dockerd(1)
        try:
            died.wait(60)
            verdict, evidence, end = _rounds_or_death(run, booted, conc)
            r.seconds = end - t
        finally:
            t_restart = time.monotonic()
            restart()
            r.note = f"dockerd restarted in {time.monotonic() - t_restart:.1f} s"
    else:
        sig = signal.SIGKILL if fault == "sigkill" else signal.SIGSTOP
        groups = backend.rank_groups(booted, 1)
        t = time.monotonic()
        for g in groups:
            os.killpg(g, sig)
        died.wait(90)
        verdict, evidence, end = _rounds_or_death(run, booted, conc)
        r.seconds = end - t
    r.verdict, r.evidence = verdict, evidence
    r.detected = verdict == "layout dead"


def _since_log_end(booted: Booted, node_rank: int, end: float) -> float | None:
    """Seconds from the crashed rank's last log line (its death) to the failure."""
    try:
        mtime = booted.service.log_path(node_rank).stat().st_mtime
    except OSError:
        return None
    return max(0.0, time.time() - mtime - (time.monotonic() - end))


# -- the whole matrix --------------------------------------------------------------------------


def run_matrix(backends: Sequence[Backend], faults: Sequence[str] = FAULTS,
               say: Callable[[str], None] = print) -> dict[tuple[str, str], Result]:
    out: dict[tuple[str, str], Result] = {}
    for backend in backends:
        for group in plan(backend.name, faults):
            for r in run_boot(backend, group, say):
                out[(r.fault, r.backend)] = r
    return out


def table(results: dict[tuple[str, str], Result], backends: Sequence[str] = BACKENDS,
          faults: Sequence[str] = FAULTS, not_run: dict[str, str] | None = None) -> str:
    """Markdown: faults × backends; each cell ok/MISS, verdict, detected, leftovers, seconds."""
    not_run = not_run or {}
    head = ["fault", "expected", *backends]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for f in faults:
        cells = []
        for b in backends:
            why = not_applicable(f, b)
            if why:
                cells.append(f"n/a ({why})")
            elif (f, b) in results:
                cells.append(results[(f, b)].cell())
            else:
                cells.append(f"not run ({not_run.get(b, 'not in this run')})")
        lines.append(f"| {f}: {DESCRIBE[f]} | {EXPECTED[f]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def from_json(path: Path) -> list[Result]:
    """The cells an :func:`as_json` file holds."""
    names = {f.name for f in fields(Result)}
    return [Result(**{k: v for k, v in d.items() if k in names})
            for d in json.loads(path.read_text(encoding="utf-8"))]


def as_json(results: dict[tuple[str, str], Result]) -> str:
    return json.dumps([{**r.__dict__, "ok": r.ok, "expected": r.expected}
                       for r in results.values()], indent=1)




def check_cell(r: Result) -> None:
    """A chaos test's assertions on one cell: the expected verdict, detected, its evidence, and
    nothing left on any host."""
    assert r.verdict == r.expected, (
        f"{r.fault} on {r.backend}: verdict {r.verdict!r}, expected {r.expected!r}: "
        f"{r.evidence} ({r.note})")
    assert r.detected, f"{r.fault} on {r.backend}: not detected: {r.evidence} ({r.note})"
    assert r.evidence_ok, f"{r.fault} on {r.backend}: the failure lacks its evidence: {r.evidence}"
    assert not r.leftovers, f"{r.fault} on {r.backend}: left behind: {r.leftovers}"
