"""Step 8, one layout's life in a sweep, free of pytest: booted (the ready layout), live (its
status while it boots and runs), rounds (the workload and every repeat of a concurrency),
lifecycle (boot and teardown), profile_step (the profile window), comm_step (the all-reduce
benchmark), slo_search (the highest load within an SLO on one boot), adaptive (the planner's
choices inside a run) and sweeprun (:class:`SweepRun`, the
facade the fixtures and scripts call).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.run.adaptive import AdaptiveSweep
    from pytest_ppsweep.run.booted import Booted
    from pytest_ppsweep.run.lifecycle import GpuMemoryWarning
    from pytest_ppsweep.run.live import LiveStatus, boot_status, round_bar
    from pytest_ppsweep.run.sweeprun import SweepRun
    from pytest_ppsweep.run.workloads import workload_spec

_NAMES = {
    "AdaptiveSweep": "adaptive",
    "Booted": "booted",
    "GpuMemoryWarning": "lifecycle",
    "LiveStatus": "live",
    "SweepRun": "sweeprun",
    "boot_status": "live",
    "round_bar": "live",
    "workload_spec": "workloads",
}
__getattr__ = lazy(__name__, _NAMES)
__all__ = [
    "AdaptiveSweep",
    "Booted",
    "GpuMemoryWarning",
    "LiveStatus",
    "SweepRun",
    "boot_status",
    "round_bar",
    "workload_spec",
]
