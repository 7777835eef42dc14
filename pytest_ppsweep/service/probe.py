"""Read-only HTTP probes of a running service: health per rank, server info, topology.

Server info is the evidence of what really booted (SGLang contract §1.3); it carries secrets
(``api_key`` and friends) when they are set, so everything stored goes through :func:`redact`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

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


def server_info(base_url: str, timeout: float = 10.0) -> dict[str, Any]:
    """``/server_info`` (SGLang ≥ 0.5.2x), falling back to ``/get_server_info`` on 404."""
    resp = requests.get(f"{base_url}/server_info", timeout=timeout)
    if resp.status_code == 404:
        resp = requests.get(f"{base_url}/get_server_info", timeout=timeout)
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


@dataclass(frozen=True)
class Topology:
    """What the server says it runs (rank 0's view)."""

    pp: int | None
    tp: int | None
    ep: int | None
    nnodes: int | None
    moe_runner_backend: str | None
    moe_a2a_backend: str | None
    pp_max_micro_batch_size: int | None  # the effective value, from internal_states
    max_running_requests: int | None
    version: str | None
    simulated: bool
    time_scale: float


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _first_int(*values: Any) -> int | None:
    return next((v for v in map(_int, values) if v is not None), None)


def topology(info: dict[str, Any]) -> Topology:
    """Extract the topology; the effective micro-batch size lives in ``internal_states[0]``."""
    states = info.get("internal_states") or [{}]
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    sim = info.get("ppsweep_sim") or {}
    mbs = _int(state.get("pp_max_micro_batch_size"))
    if mbs is None:
        mbs = _int(info.get("pp_max_micro_batch_size"))
    return Topology(
        pp=_int(info.get("pp_size")),
        tp=_int(info.get("tp_size")),
        ep=_int(info.get("ep_size")),
        nnodes=_int(info.get("nnodes")),
        moe_runner_backend=info.get("moe_runner_backend"),
        moe_a2a_backend=info.get("moe_a2a_backend"),
        pp_max_micro_batch_size=mbs,
        max_running_requests=_first_int(
            state.get("effective_max_running_requests_per_dp"),
            state.get("max_running_requests"),
            info.get("max_running_requests"),
        ),
        version=info.get("version"),
        simulated=bool(sim.get("simulated", False)),
        time_scale=float(sim.get("time_scale", 1.0)) if sim else 1.0,
    )
