"""Emulator settings taken from the environment (see docs/ARCHITECTURE.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..model.profile import DEFAULT_PROFILE
from .faults import FaultSet, parse_faults
from .gpustate import state_dir_of

DEFAULT_TIME_SCALE = 100.0
# A value unique to one boot, given by the plugin to every rank: the emulator echoes it in the
# BOOT_TOKEN_HEADER of every HTTP answer and in /server_info's ppsweep_sim (real SGLang does not).
BOOT_TOKEN_ENV = "PPSWEEP_BOOT_TOKEN"
BOOT_TOKEN_HEADER = "X-PPSweep-Boot-Token"
# SGLang's own P/D timeouts, read from the same variables with the same defaults (0.5.23
# sglang/srt/environ.py; disaggregation/common/conn.py uses them): a prefill gives a request up
# when no decode took its KV within the bootstrap timeout, a decode when the KV has not arrived
# within the waiting timeout. Emulated seconds (the time scale shortens them like every wait).
KV_BOOTSTRAP_TIMEOUT_ENV = "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"
KV_WAITING_TIMEOUT_ENV = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"
DEFAULT_KV_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class SimSettings:
    """Environment-level knobs of one rank process."""

    time_scale: float
    profile: str
    faults: FaultSet
    state_dir: Path
    seed: int
    boot_token: str = ""  # PPSWEEP_BOOT_TOKEN: echoed so the plugin knows this boot answers
    # PPSWEEP_SIM_IMAGE (the image this rank stands for; a sweep's [env] sets it to "{image}")
    # and PPSWEEP_SIM_IMAGE_SLOWDOWN ("IMAGE=FACTOR,..."): the compute of a listed image is
    # FACTOR times slower (an image that regressed; bisection's tests). 1.0 for any other.
    image: str = ""
    compute_factor: float = 1.0
    kv_bootstrap_timeout_s: float = DEFAULT_KV_TIMEOUT_S
    kv_waiting_timeout_s: float = DEFAULT_KV_TIMEOUT_S


def image_slowdown(spec: str | None, image: str) -> float:
    """The compute factor of ``image`` in a ``PPSWEEP_SIM_IMAGE_SLOWDOWN`` value
    (``IMAGE=FACTOR`` items, comma-separated; an image reference holds neither ``=`` nor ``,``);
    1.0 for an image not listed. ValueError naming the item that is not ``IMAGE=FACTOR > 0``."""
    factor = 1.0
    for item in (spec or "").split(","):
        if not item.strip():
            continue
        name, eq, value = item.strip().rpartition("=")
        try:
            number = float(value)
        except ValueError:
            number = 0.0
        if not eq or not name or not number > 0:
            raise ValueError(f"PPSWEEP_SIM_IMAGE_SLOWDOWN: expected IMAGE=FACTOR (FACTOR > 0), "
                             f"found {item.strip()!r}")
        if name == image:
            factor = number
    return factor


def load_settings(env: Mapping[str, str] | None = None) -> SimSettings:
    """Read ``PPSWEEP_SIM_*`` variables (raises ValueError on bad values)."""
    env = os.environ if env is None else env
    scale = float(env.get("PPSWEEP_SIM_TIME_SCALE", "") or DEFAULT_TIME_SCALE)
    if scale <= 0:
        raise ValueError(f"PPSWEEP_SIM_TIME_SCALE must be > 0, got {scale}")
    return SimSettings(
        time_scale=scale,
        profile=env.get("PPSWEEP_SIM_PROFILE", "") or DEFAULT_PROFILE,
        faults=parse_faults(env.get("PPSWEEP_SIM_FAULTS")),
        state_dir=state_dir_of(env),
        seed=int(env.get("PPSWEEP_SIM_SEED", "") or 0),
        boot_token=env.get(BOOT_TOKEN_ENV, ""),
        image=env.get("PPSWEEP_SIM_IMAGE", ""),
        compute_factor=image_slowdown(env.get("PPSWEEP_SIM_IMAGE_SLOWDOWN"),
                                      env.get("PPSWEEP_SIM_IMAGE", "")),
        kv_bootstrap_timeout_s=_positive(env, KV_BOOTSTRAP_TIMEOUT_ENV),
        kv_waiting_timeout_s=_positive(env, KV_WAITING_TIMEOUT_ENV),
    )


def _positive(env: Mapping[str, str], name: str) -> float:
    """A P/D timeout variable in seconds (DEFAULT_KV_TIMEOUT_S when unset); ValueError unless
    it is a number > 0."""
    value = float(env.get(name, "") or DEFAULT_KV_TIMEOUT_S)
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value
