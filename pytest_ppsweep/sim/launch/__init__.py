"""Layer 2 of the emulator, the launch: what one ``launch_server`` invocation asks for and prints.

SGLang's command line and its argument checks (cli, config: a resolved :class:`SimConfig`), the
emulator's environment settings and injected faults (settings, faults), and the output formats
of a rank: SGLang's log lines and crash records (logfmt, faultlog) and the GPU-state file that
the nvidia-smi shim reads (gpustate). No HTTP and no event loop; it builds on ``model`` only.

Layers: ``model`` → ``launch`` → ``http`` → ``rank``; each imports only the layers before it
(tests/test_layering_sim.py checks this).
"""

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing (mypy reads the name): the nvidia-smi shim, an
# interpreter per call, imports this module
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .config import SimConfig

# re-exported name → its module, imported on first use (__getattr__)
_NAMES = {
    "SimConfig": "config",
}

__all__ = [
    "SimConfig",
]


def __getattr__(name: str) -> Any:
    """A re-exported name, imported on first use (PEP 562). Importing one module of this
    package does not import the others (the launch config imports the whole model layer): the
    nvidia-smi shim, an interpreter per call, imports only the modules it reads."""
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import (
        config,
    )

    modules = {
        "config": config,
    }
    value = getattr(modules[module], name)
    globals()[name] = value
    return value
