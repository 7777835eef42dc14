"""SGLang emulator used by pytest-ppsweep in place of ``python3 -m sglang.launch_server``.

Run it as ``python3 -m pytest_ppsweep.sim <launch_server args>``; every node rank is its own
process. Importing this package has no side effects: the modules only define functions and
classes, the work starts in :mod:`pytest_ppsweep.sim.__main__`.

Layers, each importing only the ones before it (tests/test_layering_sim.py): this module
(the base), :mod:`.model` (the physics), :mod:`.launch` (command line, settings, faults, log
formats), :mod:`.http` (rank 0's API), :mod:`.rank` (the rank process), then the entry points
``__main__`` and :mod:`.smi` (the nvidia-smi shim).

Environment (see docs/ARCHITECTURE.md): ``PPSWEEP_SIM_TIME_SCALE``, ``PPSWEEP_SIM_PROFILE``,
``PPSWEEP_SIM_FAULTS``, ``PPSWEEP_SIM_STATE_DIR``.
"""

from __future__ import annotations

SGLANG_VERSION = "0.5.23"

__all__ = ["SGLANG_VERSION"]
