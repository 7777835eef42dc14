"""Helpers of the conformance tests (test_conformance.py): boot one 2-node PP2 service, real
SGLang 0.5.23 on CPU or the emulator, on loopback, and watch every rank's /health while it boots.

Both services get the same launch arguments (the CPU flags of tests/real, ``--pp-size 2
--nnodes 2``); only the module and the interpreter differ. Addresses 127.0.15.x, HTTP ports
37000-37399, dist-init ports 37400-37999 (SGLang also binds a few ports above its dist port).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from pytest_ppsweep.sim.model.profile import resolve_profile_path
from support.real import MARK_VAR  # our ranks are found in /proc by this

SGLANG_HOSTS = ("127.0.15.1", "127.0.15.2")
EMULATOR_HOSTS = ("127.0.15.11", "127.0.15.12")
CPU_FLAGS = ("--device", "cpu", "--attention-backend", "torch_native",
             "--sampling-backend", "pytorch", "--max-total-tokens", "8192")  # fmt: skip
LAYOUT = ("--pp-size", "2", "--tp-size", "1")
HEALTH_TIMEOUT_S = 10.0  # rank 0's /health runs a generation: seconds on a busy CPU


def ports() -> tuple[int, int, int, int]:
    """(sglang http, sglang dist, emulator http, emulator dist) private to this process."""
    k = os.getpid() % 50
    return 37000 + 4 * k, 37400 + 12 * k, 37000 + 4 * k + 2, 37400 + 12 * k + 6


def emulator_profile(model_dir: Path, dest: Path) -> Path:
    """The ``tiny`` profile with one GPU per node and the tiny Llama's shape (context 4096,
    vocabulary 256, 4 layers), written to ``dest``: a 2-node PP2 layout fills it."""
    raw = tomllib.loads(resolve_profile_path("tiny").read_text())
    hf = json.loads((model_dir / "config.json").read_text())
    raw["name"] = "tiny-1gpu"
    raw["gpu"]["gpus_per_node"] = raw["gpu"]["gpus_per_pcie_island"] = 1
    raw["model"] |= {
        "model_path_default": str(model_dir),
        "model_type": hf["model_type"],
        "architectures": hf["architectures"],
        "num_layers": hf["num_hidden_layers"],
        "vocab_size": hf["vocab_size"],
        "context_length": hf["max_position_embeddings"],
    }
    lines = [f'name = "{raw.pop("name")}"']
    for section, values in raw.items():
        lines.append(f"\n[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    dest.write_text("\n".join(lines) + "\n")
    return dest


@dataclass
class Service:
    """One booted service: its rank processes, logs and what /health said while booting."""

    kind: str  # "emulator" | "sglang"
    hosts: tuple[str, ...]
    port: int
    model_path: str
    log_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    # per rank: the distinct consecutive /health results seen from launch to ready
    # (None: connection refused or timed out)
    phases: list[list[int | None]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    boot_s: float = 0.0
    watchers: list[threading.Thread] = field(default_factory=list)
    stop_watching: threading.Event = field(default_factory=threading.Event)

    def url(self, rank: int = 0) -> str:
        return f"http://{self.hosts[rank]}:{self.port}"

    def log(self, rank: int) -> str:
        return (self.log_dir / f"node{rank}.log").read_text(errors="replace")

    def tails(self, n: int = 3000) -> str:
        return "\n".join(f"--- node{r} ---\n{self.log(r)[-n:]}" for r in range(len(self.hosts)))

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM each rank's process group, SIGKILL what is left after ``timeout_s``."""
        self.stop_watching.set()
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(deadline - time.monotonic(), 0.1))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group (schedulers)
            proc.wait()


def _probe(url: str) -> int | None:
    try:
        return requests.get(url + "/health", timeout=HEALTH_TIMEOUT_S).status_code
    except requests.RequestException:
        return None


def _watch(service: Service, rank: int, deadline: float) -> None:
    """Record the distinct consecutive /health results of ``rank`` until it answers 200."""
    seen = service.phases[rank]
    while not service.stop_watching.is_set() and time.monotonic() < deadline:
        code = _probe(service.url(rank))
        if not seen or seen[-1] != code:
            seen.append(code)
        if code == 200:
            return
        time.sleep(0.02)


def launch(
    kind: str,
    *,
    python: str,
    model_path: str,
    hosts: tuple[str, ...],
    port: int,
    dist_port: int,
    log_dir: Path,
    env: dict[str, str],
    mark: str,
    boot_timeout_s: float,
    extra: tuple[str, ...] = (),
) -> Service:
    """Start every rank (own process group each) and one /health watcher per rank, which
    polls from the launch on; returns at once (:func:`wait_ready` waits). ``extra``: flags
    after the common ones (a later flag overrides an earlier one)."""
    module = "sglang.launch_server" if kind == "sglang" else "pytest_ppsweep.sim"
    service = Service(kind, hosts, port, model_path, log_dir, phases=[[] for _ in hosts])
    log_dir.mkdir(parents=True, exist_ok=True)
    for rank, host in enumerate(hosts):
        argv = [
            python, "-m", module, "--model-path", model_path, *CPU_FLAGS, "--port", str(port),
            "--host", host, *LAYOUT, "--nnodes", str(len(hosts)), "--node-rank", str(rank),
            "--dist-init-addr", f"{hosts[0]}:{dist_port}", *extra,
        ]  # fmt: skip
        rank_env = {**os.environ, **env, MARK_VAR: mark}
        if kind == "sglang":
            rank_env["SGLANG_CPU_OMP_THREADS_BIND"] = str(rank % len(os.sched_getaffinity(0)))
        with (log_dir / f"node{rank}.log").open("wb") as fh:
            proc = subprocess.Popen(
                argv, stdout=fh, stderr=subprocess.STDOUT, env=rank_env, start_new_session=True
            )
        service.procs.append(proc)
    deadline = service.started + boot_timeout_s
    for rank in range(len(hosts)):
        watcher = threading.Thread(target=_watch, args=(service, rank, deadline), daemon=True)
        watcher.start()
        service.watchers.append(watcher)
    return service


def wait_ready(service: Service) -> None:
    """Wait until every rank's /health answered 200; raise with the log tails when a rank
    exits or the boot timeout (see :func:`launch`) passes first."""
    while any(w.is_alive() for w in service.watchers):
        dead = [(r, p.returncode) for r, p in enumerate(service.procs) if p.poll() is not None]
        if dead:
            service.stop_watching.set()
            raise RuntimeError(f"{service.kind}: ranks exited {dead}\n{service.tails()}")
        time.sleep(0.05)
    if not service.boot_s:
        service.boot_s = time.monotonic() - service.started
    if any(not seen or seen[-1] != 200 for seen in service.phases):
        raise RuntimeError(
            f"{service.kind}: not ready after {time.monotonic() - service.started:.0f} s "
            f"(/health seen: {service.phases})\n{service.tails()}"
        )


def sim_env(profile: Path, state_dir: Path) -> dict[str, str]:
    """The emulator's environment: the 1-GPU profile, 10x time (a visible 503 window)."""
    return {
        "PPSWEEP_SIM_PROFILE": str(profile),
        "PPSWEEP_SIM_TIME_SCALE": "10",
        "PPSWEEP_SIM_STATE_DIR": str(state_dir),
        "PPSWEEP_SIM_FAULTS": "",
    }


SGLANG_ENV = {
    "SGLANG_USE_CPU_ENGINE": "1",
    "GLOO_SOCKET_IFNAME": "lo",
    "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0",
    "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


@dataclass(frozen=True)
class Stream:
    """One streamed answer: status, content type, the raw body and its ``data:`` payloads."""

    status: int
    content_type: str
    raw: bytes
    events: list[Any]  # parsed JSON objects; the terminator as the string "[DONE]"


def stream(url: str, body: dict[str, Any], timeout_s: float = 60.0) -> Stream:
    """POST ``body`` and read the whole SSE answer."""
    resp = requests.post(url, json=body, stream=True, timeout=timeout_s)
    raw = b"".join(resp.iter_content(chunk_size=None))
    events: list[Any] = []
    for block in raw.split(b"\n\n"):
        if not block.strip():
            continue
        assert block.startswith(b"data: "), f"not an SSE data event: {block[:200]!r}"
        payload = block[6:]
        events.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
    return Stream(resp.status_code, resp.headers.get("Content-Type", ""), raw, events)


def type_name(value: Any) -> str:
    """JSON type of a value (int and float kept apart, as the plugin's readers do)."""
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list",
            dict: "dict"}[type(value)]  # fmt: skip


def types_of(obj: dict[str, Any], keys: Iterable[str]) -> dict[str, str | None]:
    """{key: JSON type name, or None when absent}."""
    return {k: type_name(obj[k]) if k in obj else None for k in keys}
