"""Layer 1 of the emulator, the model: the physics of one served layout, no HTTP, no processes.

Profiles (hardware and model parameters, loaded from ``sim/profiles/*.toml``), the placement of
pipeline stages on nodes and GPUs, the cost model of a pipeline tick, GPU memory and boot-phase
plans, the PP scheduler, the real-time driver and the engine that runs requests through it,
Prometheus metrics, and the virtual-time bench used to calibrate the cost model. It imports only
the standard library (and nothing of the emulator's other layers); importing it does not import
aiohttp.

Layers: ``model`` → ``launch`` → ``http`` → ``rank``; each imports only the layers before it
(tests/test_layering_sim.py checks this).
"""

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing (mypy reads the name): the nvidia-smi shim, an
# interpreter per call, imports this module
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .driver import RealtimeDriver

# re-exported name → its module, imported on first use (__getattr__)
_NAMES = {
    "RealtimeDriver": "driver",
}

__all__ = [
    "RealtimeDriver",
]


def __getattr__(name: str) -> Any:
    """A re-exported name, imported on first use (PEP 562). Importing one module of this
    package does not import the others (the driver imports asyncio; the engine, the scheduler
    and the vbench are most of the layer): the nvidia-smi shim, an interpreter per call, imports
    only the modules it reads."""
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import (
        driver,
    )

    modules = {
        "driver": driver,
    }
    value = getattr(modules[module], name)
    globals()[name] = value
    return value
