"""No stale server is measured, on real SGLang 0.5.23 (CPU): a boot whose ports something else
answers fails at once (real SGLang echoes no boot token, so the launched rank must own the
listening socket), and a launched rank 0 that exits (its rendezvous port is taken) fails the
boot at once although something answers 200 on its HTTP port and nothing can tell whose it is
(two-node TP2 boots).
"""

from __future__ import annotations

import http.server
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from support.real import Provisioned, marked_processes, sweep_toml

from pytest_ppsweep.cluster.base import RankHandle
from pytest_ppsweep.cluster.hosts import LocalLauncher
from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.matrix.model import Sweep
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.service.launch import Service
from pytest_ppsweep.service.readiness import BootFailed

pytestmark = pytest.mark.slow

# Two nodes are enough for both cases (rank 0 takes the rendezvous port only when there is more
# than one node); four would add two more real ranks' start-up to each boot on 2 cores.
TP2 = """
[[configs]]
pp = 1
tp = 2
"""


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def squatters() -> Iterator[Callable[[str, int, bool], None]]:
    """``squat(address, port, http)``: this process holds the port (answering 200 if http)."""
    closers: list[Callable[[], None]] = []

    def squat(address: str, port: int, answer: bool) -> None:
        if answer:
            server = http.server.HTTPServer((address, port), _Answer)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            closers.extend([server.shutdown, server.server_close])
        else:
            sock = socket.socket()
            sock.bind((address, port))
            sock.listen()
            closers.append(sock.close)

    yield squat
    for close in closers:
        close()


def _sweep(tmp_path: Path, prov: Provisioned, mark: str, offset: int) -> Sweep:
    port = 37000 + (os.getpid() % 90) * 10 + offset
    text = sweep_toml(prov, port=port, dist_port=port + 1, mark=mark, configs=TP2,
                      baseline="pp1-tp2")
    hosts = 'hosts = ["127.0.6.1", "127.0.6.2", "127.0.6.3", "127.0.6.4"]'
    assert hosts in text, text
    # two nodes, at addresses of this module's runs only
    text = text.replace(hosts, 'hosts = ["127.0.61.1", "127.0.61.2"]')
    path = tmp_path / f"cpu-{offset}.toml"
    path.write_text(text)
    return load(path)


def test_real_sglang_boot_refuses_a_port_another_process_answers(
    tmp_path: Path, sglang_cpu: Provisioned, mark: str,
    squatters: Callable[[str, int, bool], None],
) -> None:
    sweep = _sweep(tmp_path, sglang_cpu, mark, 0)
    cluster = sweep.cluster("cpu")
    for host in cluster.hosts:  # stale servers answer 200 on every rank's port
        squatters(host.address, cluster.port, True)
    service = Service(sweep, cluster, sweep.configs[0], tmp_path / "logs")
    t0 = time.monotonic()
    with pytest.raises(BootFailed) as failed:
        service.__enter__()
    took = time.monotonic() - t0
    assert took < 30, took  # at the first answer, long before SGLang could have booted
    assert "healthy" not in failed.value.reason
    assert re.search(
        rf"node0's port answers, but not from the rank this boot launched: "
        rf"{cluster.rank0().address}:{cluster.port} is held by another process: "
        rf"pid {os.getpid()} ", str(failed.value)), str(failed.value)
    assert not marked_processes(mark)


class _Opaque:
    """A rank handle that cannot tell who holds its port (like a remote real-SGLang rank)."""

    def __init__(self, inner: RankHandle) -> None:
        self._inner = inner

    def poll(self) -> int | None:
        return self._inner.poll()

    def stop(self, grace_s: float = 5.0) -> int | None:
        return self._inner.stop(grace_s)


class _OpaqueLauncher:
    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> RankHandle:
        return _Opaque(LocalLauncher().start(spec, log_path, labels))


def test_real_sglang_rank0_that_exits_fails_the_boot_although_its_port_answers(
    tmp_path: Path, sglang_cpu: Provisioned, mark: str,
    squatters: Callable[[str, int, bool], None],
) -> None:
    sweep = _sweep(tmp_path, sglang_cpu, mark, 2)
    cluster = sweep.cluster("cpu")
    head = cluster.rank0().address
    squatters(head, cluster.port, True)  # a stale rank 0 answers 200 on the HTTP port
    squatters(head, cluster.dist_init_port, False)  # and holds the rendezvous port
    service = Service(sweep, cluster, sweep.configs[0], tmp_path / "logs",
                      launcher=_OpaqueLauncher())
    t0 = time.monotonic()
    with pytest.raises(BootFailed) as failed:
        service.__enter__()
    took = time.monotonic() - t0
    # rank 0's end: its exit, or the fatal line it logs just before (whichever is seen first)
    assert re.match(r"node0 exited with code|fatal line in node0's log", failed.value.reason), (
        str(failed.value)[-3000:]
    )
    assert took < 150, took  # the exit, not the 300 s boot timeout
    node0 = (tmp_path / "logs" / "node0.log").read_text()
    assert re.search(r"address already in use|EADDRINUSE", node0, re.I), node0[-3000:]
    assert not marked_processes(mark)
