"""pytest-ppsweep: sweep pipeline/tensor/expert parallel layouts of a multi-node SGLang service
as pytest test cases, with medians and baseline deltas in an HTML report.

The import surface of a sweep's test file: ``from pytest_ppsweep import SweepRun, Booted, …``.
Every name is loaded on first use (the plugin's start-up on every pytest run stays cheap).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.cluster.gpus import GpuMemory
    from pytest_ppsweep.matrix.model import Cluster, Config, MatrixError, Sweep
    from pytest_ppsweep.measure.gpu import WorstRank, worst_rank
    from pytest_ppsweep.measure.metrics import RoundResult
    from pytest_ppsweep.pointchecks import (
        Validity,
        accuracy_problems,
        completion_problems,
        log_problems,
        outputs_problems,
        profile_problems,
        regression_problems,
        repeat_median,
        replaced_rounds,
        slo_regression_problems,
        topology_problems,
        validity_problems,
    )
    from pytest_ppsweep.profile.collect import ProfileError
    from pytest_ppsweep.profile.trace import TraceError
    from pytest_ppsweep.run.booted import Booted
    from pytest_ppsweep.run.sweeprun import SweepRun
    from pytest_ppsweep.service.liveness import LayoutDead
    from pytest_ppsweep.service.readiness import BootFailed

__version__ = "0.1.0"

_NAMES = {
    "Booted": "run.booted",
    "BootFailed": "service.readiness",
    "Cluster": "matrix.model",
    "Config": "matrix.model",
    "GpuMemory": "cluster.gpus",
    "LayoutDead": "service.liveness",
    "MatrixError": "matrix.model",
    "ProfileError": "profile.collect",
    "RoundResult": "measure.metrics",
    "Sweep": "matrix.model",
    "SweepRun": "run.sweeprun",
    "TraceError": "profile.trace",
    "Validity": "pointchecks",
    "WorstRank": "measure.gpu",
    "accuracy_problems": "pointchecks",
    "completion_problems": "pointchecks",
    "log_problems": "pointchecks",
    "outputs_problems": "pointchecks",
    "profile_problems": "pointchecks",
    "regression_problems": "pointchecks",
    "slo_regression_problems": "pointchecks",
    "repeat_median": "pointchecks",
    "replaced_rounds": "pointchecks",
    "topology_problems": "pointchecks",
    "validity_problems": "pointchecks",
    "worst_rank": "measure.gpu",
}
__getattr__ = lazy(__name__, _NAMES)
__all__ = [
    "BootFailed",
    "Booted",
    "Cluster",
    "Config",
    "GpuMemory",
    "LayoutDead",
    "MatrixError",
    "ProfileError",
    "RoundResult",
    "Sweep",
    "SweepRun",
    "TraceError",
    "Validity",
    "WorstRank",
    "__version__",
    "accuracy_problems",
    "completion_problems",
    "log_problems",
    "outputs_problems",
    "profile_problems",
    "regression_problems",
    "repeat_median",
    "replaced_rounds",
    "slo_regression_problems",
    "topology_problems",
    "validity_problems",
    "worst_rank",
]
