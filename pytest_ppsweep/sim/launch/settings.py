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


@dataclass(frozen=True)
class SimSettings:
    """Environment-level knobs of one rank process."""

    time_scale: float
    profile: str
    faults: FaultSet
    state_dir: Path
    seed: int
    boot_token: str = ""  # PPSWEEP_BOOT_TOKEN: echoed so the plugin knows this boot answers


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
    )
