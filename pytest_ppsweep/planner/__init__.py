"""The planner: a physical cost model of prefill rounds (mirroring the emulator's, without
importing it) fitted to the rounds a cluster measured, predictions with 90 % intervals for every
layout the cluster can run, and the adaptive sweep's decisions (which layout to boot next, when
the best is decided, which third repeat to skip).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.planner.trust import fit_trust

_NAMES = {
    "fit_trust": "trust",
}
__all__ = [
    "fit_trust",
]
__getattr__ = lazy(__name__, _NAMES)
