"""Layer 2 of the emulator, the launch: what one ``launch_server`` invocation asks for and prints.

SGLang's command line and its argument checks (cli, config: a resolved :class:`SimConfig`), the
emulator's environment settings and injected faults (settings, faults), and the output formats
of a rank: SGLang's log lines and crash records (logfmt, faultlog) and the GPU-state file that
the nvidia-smi shim reads (gpustate). No HTTP and no event loop; it builds on ``model`` only.

Layers: ``model`` → ``launch`` → ``http`` → ``rank``; each imports only the layers before it
(tests/test_layering_sim.py checks this).
"""

from __future__ import annotations

from . import faultlog

# typing.TYPE_CHECKING without importing typing (mypy reads the name): the nvidia-smi shim, an
# interpreter per call, imports this module
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .cli import ServerArgs, build_parser, parse_args, redact_command
    from .config import LaunchError, SimConfig, resolve
    from .faults import DEFAULT_HANG_S, Fault, FaultSet, FaultSpecError, parse_faults
    from .gpustate import DEFAULT_STATE_DIR, GpuStatePublisher, GpuUse, read_state, state_path
    from .logfmt import SchedulerLog, SimLog
    from .settings import DEFAULT_TIME_SCALE, SimSettings, load_settings

# re-exported name → its module, imported on first use (__getattr__)
_NAMES = {
    "ServerArgs": "cli",
    "build_parser": "cli",
    "parse_args": "cli",
    "redact_command": "cli",
    "LaunchError": "config",
    "SimConfig": "config",
    "resolve": "config",
    "DEFAULT_HANG_S": "faults",
    "Fault": "faults",
    "FaultSet": "faults",
    "FaultSpecError": "faults",
    "parse_faults": "faults",
    "DEFAULT_STATE_DIR": "gpustate",
    "GpuStatePublisher": "gpustate",
    "GpuUse": "gpustate",
    "read_state": "gpustate",
    "state_path": "gpustate",
    "SchedulerLog": "logfmt",
    "SimLog": "logfmt",
    "DEFAULT_TIME_SCALE": "settings",
    "SimSettings": "settings",
    "load_settings": "settings",
}

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


def __getattr__(name: str) -> Any:
    """A re-exported name, imported on first use (PEP 562). Importing one module of this
    package does not import the others (the launch config imports the whole model layer): the
    nvidia-smi shim, an interpreter per call, imports only the modules it reads."""
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import cli, config, faults, gpustate, logfmt, settings

    modules = {
        "cli": cli,
        "config": config,
        "faults": faults,
        "gpustate": gpustate,
        "logfmt": logfmt,
        "settings": settings,
    }
    value = getattr(modules[module], name)
    globals()[name] = value
    return value
