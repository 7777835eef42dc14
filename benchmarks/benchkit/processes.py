"""Processes of the client benchmarks: free ports, readiness polls, stopping what we started, and
the zero-delay server (zero_server.py) in its own process."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ZERO_SERVER = Path(__file__).resolve().with_name("zero_server.py")


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``url`` until it answers 200 (raises on timeout or when ``proc`` exits)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before {url} answered")
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(url, timeout=2) as resp,
        ):
            if resp.status == 200:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer 200 within {timeout_s} s")


def port_free(host: str, port: int) -> bool:
    """True when ``host:port`` can be bound now."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def stop_process(proc: subprocess.Popen[Any], timeout_s: float = 5.0) -> None:
    """SIGTERM one process we started, SIGKILL it if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def zero_server(host: str, port: int, log: Path) -> Iterator[str]:
    """Run the zero-delay server (zero_server.py) in its own process; yield its URL."""
    if not port_free(host, port):
        raise SystemExit(f"{host}:{port} is busy")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ZERO_SERVER), host, str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://{host}:{port}"
    try:
        wait_http(url + "/health", 30, proc)
        yield url
    finally:
        stop_process(proc)


def exit_on_stop_signals() -> None:
    """SIGTERM and SIGHUP end the benchmark like an exception (exit status 128 + signal), so its
    ``finally`` blocks stop what it started (a busy-core process; a sweep's pytest with
    :func:`stop_process`, whose SIGTERM lets it tear its ranks down) instead of leaving them
    running after it."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
