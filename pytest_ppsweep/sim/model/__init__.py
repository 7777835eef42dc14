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

    from .bootplan import BootPlan, plan_boot
    from .costmodel import CostModel, allreduce_s, domain_of
    from .driver import RealtimeDriver, TimeBase, process_age_s
    from .engine import Engine, Job, count_text_tokens
    from .gpumem import GB, MIB, MemoryPlan, plan_memory
    from .metrics import Metrics, render_gauges
    from .placement import (
        Layout,
        LocalScheduler,
        boundary_crosses_nodes,
        local_schedulers,
        stage_first_node,
        stage_layers,
    )
    from .profile import (
        DEFAULT_PROFILE,
        PROFILE_DIR,
        BootSpec,
        ComputeSpec,
        GpuSpec,
        MemorySpec,
        ModelSpec,
        NetworkSpec,
        Profile,
        SchedulerSpec,
        load_profile,
        resolve_profile_path,
    )
    from .scheduler import PPScheduler, SimRequest
    from .vbench import RoundResult, make_scheduler, run_round

# re-exported name → its module, imported on first use (__getattr__)
_NAMES = {
    "BootPlan": "bootplan",
    "plan_boot": "bootplan",
    "CostModel": "costmodel",
    "allreduce_s": "costmodel",
    "domain_of": "costmodel",
    "RealtimeDriver": "driver",
    "TimeBase": "driver",
    "process_age_s": "driver",
    "Engine": "engine",
    "Job": "engine",
    "count_text_tokens": "engine",
    "GB": "gpumem",
    "MIB": "gpumem",
    "MemoryPlan": "gpumem",
    "plan_memory": "gpumem",
    "Metrics": "metrics",
    "render_gauges": "metrics",
    "Layout": "placement",
    "LocalScheduler": "placement",
    "boundary_crosses_nodes": "placement",
    "local_schedulers": "placement",
    "stage_first_node": "placement",
    "stage_layers": "placement",
    "BootSpec": "profile",
    "ComputeSpec": "profile",
    "DEFAULT_PROFILE": "profile",
    "GpuSpec": "profile",
    "MemorySpec": "profile",
    "ModelSpec": "profile",
    "NetworkSpec": "profile",
    "PROFILE_DIR": "profile",
    "Profile": "profile",
    "SchedulerSpec": "profile",
    "load_profile": "profile",
    "resolve_profile_path": "profile",
    "PPScheduler": "scheduler",
    "SimRequest": "scheduler",
    "RoundResult": "vbench",
    "make_scheduler": "vbench",
    "run_round": "vbench",
}

__all__ = [
    "DEFAULT_PROFILE",
    "GB",
    "MIB",
    "PROFILE_DIR",
    "BootPlan",
    "BootSpec",
    "ComputeSpec",
    "CostModel",
    "Engine",
    "GpuSpec",
    "Job",
    "Layout",
    "LocalScheduler",
    "MemoryPlan",
    "MemorySpec",
    "Metrics",
    "ModelSpec",
    "NetworkSpec",
    "PPScheduler",
    "Profile",
    "RealtimeDriver",
    "RoundResult",
    "SchedulerSpec",
    "SimRequest",
    "TimeBase",
    "allreduce_s",
    "boundary_crosses_nodes",
    "count_text_tokens",
    "domain_of",
    "load_profile",
    "local_schedulers",
    "make_scheduler",
    "plan_boot",
    "plan_memory",
    "process_age_s",
    "render_gauges",
    "resolve_profile_path",
    "run_round",
    "stage_first_node",
    "stage_layers",
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
        bootplan,
        costmodel,
        driver,
        engine,
        gpumem,
        metrics,
        placement,
        profile,
        scheduler,
        vbench,
    )

    modules = {
        "bootplan": bootplan,
        "costmodel": costmodel,
        "driver": driver,
        "engine": engine,
        "gpumem": gpumem,
        "metrics": metrics,
        "placement": placement,
        "profile": profile,
        "scheduler": scheduler,
        "vbench": vbench,
    }
    value = getattr(modules[module], name)
    globals()[name] = value
    return value
