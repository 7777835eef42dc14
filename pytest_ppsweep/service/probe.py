"""Read-only HTTP probes of a running service: health per rank, server info, topology.

Server info is the evidence of what really booted (the engine reads it: engine/); it carries secrets
(``api_key`` and friends) when they are set, so everything stored goes through :func:`redact`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests

from pytest_ppsweep.engine.base import Engine, Topology
from pytest_ppsweep.engine.engines import engine_of

__all__ = ["BOOT_TOKEN_ENV", "BOOT_TOKEN_HEADER", "Topology", "health", "health_and_token",
           "server_info", "topology"]

# The emulator echoes the PPSWEEP_BOOT_TOKEN it was started with in this header of every
# answer (real SGLang sends none): a different token is a server of another boot.
BOOT_TOKEN_ENV = "PPSWEEP_BOOT_TOKEN"
BOOT_TOKEN_HEADER = "X-PPSweep-Boot-Token"


def health(base_url: str, timeout: float = 2.0) -> int | None:
    """HTTP status of ``GET /health``; None when the port refuses or times out."""
    return health_and_token(base_url, timeout)[0]


def health_and_token(base_url: str, timeout: float = 2.0) -> tuple[int | None, str | None]:
    """HTTP status of ``GET /health`` and the boot token the server echoed (None: no token,
    or no answer)."""
    try:
        resp = requests.get(f"{base_url}/health", timeout=timeout)
    except requests.RequestException:
        return None, None
    return resp.status_code, resp.headers.get(BOOT_TOKEN_HEADER)


def server_info(base_url: str, timeout: float = 10.0, engine: Engine | None = None,
                log: Path | None = None) -> dict[str, Any]:
    """The engine's server info: its paths tried in order, a 404 falling through to the next
    (SGLang: ``/server_info``, then ``/get_server_info``). An engine that serves none reads it
    from rank 0's boot ``log`` and its metrics (vLLM)."""
    engine = engine or engine_of()
    paths = engine.endpoints.server_info
    if not paths:
        return _logged(base_url, timeout, engine, log)
    for path in paths:
        resp = requests.get(f"{base_url}{path}", timeout=timeout)
        if resp.status_code != 404:
            break
    try:
        data = resp.json() if resp.ok else None
    except ValueError:  # requests' JSONDecodeError
        data = None
    if not isinstance(data, dict):
        # What answered, and where, instead of a decoder traceback: a proxy, another server on
        # the port, or an error page.
        kind = "no JSON object" if resp.ok else "an error"
        raise ValueError(
            f"GET {resp.url} answered {resp.status_code} "
            f"(content type {resp.headers.get('Content-Type') or 'none'}) with {kind}; body "
            f"starts {resp.text[:200]!r}"
        )
    return data


def _logged(base_url: str, timeout: float, engine: Engine, log: Path | None) -> dict[str, Any]:
    """The server info an engine reads from rank 0's boot log and its metrics text."""
    if log is None:
        raise ValueError(f"{engine.name} serves no server info and no boot log was given")
    resp = requests.get(f"{base_url}{engine.endpoints.metrics}", timeout=timeout)
    if not resp.ok:
        raise ValueError(f"GET {resp.url} answered {resp.status_code}; body starts "
                         f"{resp.text[:200]!r}")
    return engine.logged_server_info(
        log.read_text(errors="replace").splitlines(), resp.text)


def topology(info: dict[str, Any], engine: Engine | None = None) -> Topology:
    """What the server info says runs, read by the engine that answered it."""
    return (engine or engine_of()).topology(info)
