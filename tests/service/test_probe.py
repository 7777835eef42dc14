"""The server info of an engine that serves none (vLLM 0.32): read from rank 0's boot log and
the engine's /metrics, over real HTTP from a stand-in that answers vLLM's captured metrics."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.httpthread import serving

from pytest_ppsweep.engine.vllm import ENGINE
from pytest_ppsweep.engine.vllm import server_info as vllm_server_info
from pytest_ppsweep.service.probe import server_info, topology

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm-0.32.0-cpu"


@pytest.fixture
def metrics_url() -> Iterator[str]:
    """A server on the loopback that answers GET /metrics with TP2's captured metrics and 404
    to every other path (as vLLM does to /server_info outside development mode)."""
    body = (DATA / "tp2-metrics.txt").read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/metrics"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(body if ok else b'{"detail":"Not Found"}')

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url


def test_vllm_server_info_is_read_from_the_boot_log_and_metrics(metrics_url: str) -> None:
    log = DATA / "tp2-boot.log"
    info = server_info(metrics_url, engine=ENGINE, log=log)
    assert info == vllm_server_info(log.read_text().splitlines(),
                                    (DATA / "tp2-metrics.txt").read_text())
    topo = topology(info, ENGINE)
    assert (topo.pp, topo.tp, topo.ep, topo.nnodes, topo.version) == (1, 2, 1, 1, "0.32.0")
    assert topo.max_total_tokens is not None and topo.max_total_tokens > 0


def test_without_its_boot_log_it_says_so(metrics_url: str) -> None:
    with pytest.raises(ValueError, match="vllm serves no server info and no boot log"):
        server_info(metrics_url, engine=ENGINE)
