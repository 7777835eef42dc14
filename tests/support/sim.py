"""Helpers of the emulator tests: real processes on 127.0.9.x, ports 39000-39899 only."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from pytest_ppsweep.sim.rank.localcluster import LocalCluster

FAST_SCALE = "2000"
# each cluster gets a fresh (http, dist) port pair; the worker offset keeps xdist workers apart
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").lstrip("gw") or 0)
_PORTS = itertools.count(39000 + 200 * (_WORKER % 4), 2)


def next_ports() -> tuple[int, int]:
    """A free-by-convention (http, dist-init) port pair in 39000-39799."""
    port = next(_PORTS)
    assert port < 39800, "test port range exhausted"
    return port, port + 1




def http(
    method: str,
    url: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, bytes, dict[str, str]]:
    """One HTTP request; returns (status, body, headers); raises OSError when refused."""
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    req = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


def status_of(url: str) -> int | None:
    """HTTP status of a GET, None when the connection is refused."""
    try:
        return http("GET", url, timeout=2)[0]
    except (urllib.error.URLError, OSError):
        return None


def sse_events(raw: bytes) -> list[str]:
    """The ``data:`` payloads of an SSE body."""
    return [chunk[6:] for chunk in raw.decode().split("\n\n") if chunk.startswith("data: ")]


ClusterFactory = Callable[..., LocalCluster]


def run_sim(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 20.0
) -> subprocess.CompletedProcess[str]:
    """Run one emulator process to completion (for launch failures)."""
    full_env = {
        **os.environ,
        "PPSWEEP_SIM_TIME_SCALE": FAST_SCALE,
        "PPSWEEP_SIM_PROFILE": "tiny",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest_ppsweep.sim", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
