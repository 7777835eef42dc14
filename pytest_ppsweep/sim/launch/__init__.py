"""Layer 2 of the emulator, the launch: what one ``launch_server`` invocation asks for and prints.

SGLang's command line and its argument checks (cli, config: a resolved :class:`SimConfig`), the
emulator's environment settings and injected faults (settings, faults), and the output formats
of a rank: SGLang's log lines and crash records (logfmt, faultlog) and the GPU-state file that
the nvidia-smi shim reads (gpustate). No HTTP and no event loop; it builds on ``model`` only.

Layers: ``model`` → ``launch`` → ``http`` → ``rank``; each imports only the layers before it
(tests/sim/test_sim_layers.py checks this).
"""

from __future__ import annotations

from . import faultlog
from .cli import ServerArgs, build_parser, parse_args, redact_command
from .config import LaunchError, SimConfig, resolve
from .faults import DEFAULT_HANG_S, Fault, FaultSet, FaultSpecError, parse_faults
from .gpustate import GpuStatePublisher, GpuUse, read_state, state_path
from .logfmt import SchedulerLog, SimLog
from .settings import DEFAULT_STATE_DIR, DEFAULT_TIME_SCALE, SimSettings, load_settings

__all__ = [
    "DEFAULT_HANG_S",
    "DEFAULT_STATE_DIR",
    "DEFAULT_TIME_SCALE",
    "Fault",
    "FaultSet",
    "FaultSpecError",
    "GpuStatePublisher",
    "GpuUse",
    "LaunchError",
    "SchedulerLog",
    "ServerArgs",
    "SimConfig",
    "SimLog",
    "SimSettings",
    "build_parser",
    "faultlog",
    "load_settings",
    "parse_args",
    "parse_faults",
    "read_state",
    "redact_command",
    "resolve",
    "state_path",
]
