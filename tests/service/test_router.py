"""The router part of a disaggregated layout (service/router.py), against a stand-in router
process started by the local launcher: ready only once its readiness endpoint counts every
server behind it healthy; a router that exits, logs a fatal line or never gets ready fails the
boot with its name, node and log; its own 503 polls are not fatal; it is stopped with nothing
left."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.processes import wait_until

from pytest_ppsweep.cluster.hosts import LocalLauncher
from pytest_ppsweep.cluster.rankspec import ROUTER_LABEL, RankSpec
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.service.logscan import LogScanner
from pytest_ppsweep.service.readiness import BootFailed
from pytest_ppsweep.service.router import RouterPart

SGLANG = engine_of("sglang")
ADDRESS = "127.0.33.1"

# A stand-in for sglang-router: /readiness answers 503 with one healthy server of two for its
# first NOT_READY reads (logging, coloured, the ERROR line sglang-router logs for each), then 200
# with both; MODE "exit" ends the process at once, "panic" logs a Rust panic line first, "never"
# stays at one of two.
STAND_IN = r'''
import http.server, json, os, sys
mode, not_ready = os.environ["MODE"], int(os.environ["NOT_READY"])
if mode == "exit":
    print("error: unexpected argument '--bogus' found", flush=True)
    sys.exit(2)
if mode == "panic":
    print("thread 'main' panicked at src/main.rs:1:1: boom", flush=True)
reads = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global reads
        reads += 1
        ready = mode != "never" and reads > not_ready
        body = json.dumps({"status": "ready" if ready else "not ready",
                           "healthy_workers": 2 if ready else 1, "total_workers": 2}).encode()
        if not ready:
            print("\x1b[2m2026-12-07 19:45:28\x1b[0m \x1b[31mERROR\x1b[0m \x1b[1mhttp_request"
                  "\x1b[0m{method=GET \x1b[3muri\x1b[0m\x1b[2m=\x1b[0m/readiness status_code=503}:"
                  " request failed with server error", flush=True)
        self.send_response(200 if ready else 503)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
'''


def _router(tmp_path: Path, mode: str, not_ready: int = 3) -> RouterPart:
    script = tmp_path / "router.py"
    script.write_text(STAND_IN)
    port = 20000 + os.getpid() % 5000
    spec = RankSpec(0, "node0", ADDRESS, (sys.executable, str(script), ADDRESS, str(port)),
                    {"MODE": mode, "NOT_READY": str(not_ready)}, ROUTER_LABEL)
    return RouterPart.of(spec, port, 2, SGLANG, launcher=LocalLauncher(), registry=Registry(),
                         log_dir=tmp_path / "service",
                         scanner=LogScanner(patterns=SGLANG.router_fatal_patterns),
                         run_id="run-router", cluster="local", config_id="p1-tp4-d1-tp4")


def _gone(router: RouterPart) -> bool:
    return router.proc is not None and router.proc.poll() is not None


def test_ready_once_every_server_is_healthy_and_its_own_503s_are_not_fatal(
        tmp_path: Path) -> None:
    router = _router(tmp_path, "ok")
    router.start()
    try:
        assert router.wait_ready(30) >= 0
        log = router.log_path.read_text()
        assert log.count("ERROR") == 3  # the 503s of its readiness, logged and not fatal
        assert router.findings() == []
        assert router.registry.live == 1
    finally:
        router.stop()
    wait_until(lambda: _gone(router), 10, "the router process to end")
    assert router.registry.live == 0


@pytest.mark.parametrize(("mode", "why"), [
    ("exit", r"the router process exited \(code 2\) before it was ready"),
    ("panic", r"a fatal line in the router's log: thread 'main' panicked at"),
    ("never", r"not ready after 2 s: /readiness answered 503: status 'not ready', 1 of 2 "
              r"servers healthy"),
])
def test_a_router_that_fails_fails_the_boot_naming_it(tmp_path: Path, mode: str,
                                                      why: str) -> None:
    router = _router(tmp_path, mode)
    router.start()
    try:
        with pytest.raises(BootFailed, match=rf"p1-tp4-d1-tp4: boot failed: router on node0 "
                                             rf"\(http://{ADDRESS}:\d+\): {why}") as failed:
            router.wait_ready(2)
        assert "router.log (last 25 lines)" in str(failed.value)
    finally:
        router.stop()
    wait_until(lambda: _gone(router), 10, "the router process to end")
