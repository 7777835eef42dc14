"""The planner: a physical cost model of prefill rounds (mirroring the emulator's, without
importing it) fitted to the rounds a cluster measured, predictions with 90 % intervals for every
layout the cluster can run, and the adaptive sweep's decisions (which layout to boot next, when
the best is decided, which third repeat to skip).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.planner.adaptive import (
        Candidate,
        Decision,
        Workload,
        decide,
        skip_third_repeat,
    )
    from pytest_ppsweep.planner.data import (
        Measured,
        Observation,
        PlannerError,
        load_measured,
        read_points_file,
    )
    from pytest_ppsweep.planner.fitting import (
        METRICS,
        Band,
        Fitted,
        Prediction,
        fit,
        load_fitted,
        prior_only,
    )
    from pytest_ppsweep.planner.model import (
        BOOT_PARAMS,
        MEM_PARAMS,
        PARAMS,
        SEEDS_FITTED,
        UNINFORMATIVE_LOG_SD,
        Hardware,
        Param,
        Point,
        Schedule,
        boot_features,
        independent_priors,
        mem_features,
        predict_log,
        schedule,
        stage_layers,
    )
    from pytest_ppsweep.planner.plan import (
        PlanRow,
        WorkloadSpec,
        cluster_layouts,
        parse_workload,
        plan_html,
        plan_lines,
        plan_rows,
        write_plan_csv,
    )

_NAMES = {
    "Candidate": "adaptive",
    "Decision": "adaptive",
    "Workload": "adaptive",
    "decide": "adaptive",
    "skip_third_repeat": "adaptive",
    "Measured": "data",
    "Observation": "data",
    "PlannerError": "data",
    "load_measured": "data",
    "read_points_file": "data",
    "Band": "fitting",
    "Fitted": "fitting",
    "METRICS": "fitting",
    "Prediction": "fitting",
    "fit": "fitting",
    "load_fitted": "fitting",
    "prior_only": "fitting",
    "BOOT_PARAMS": "model",
    "Hardware": "model",
    "MEM_PARAMS": "model",
    "PARAMS": "model",
    "Param": "model",
    "Point": "model",
    "SEEDS_FITTED": "model",
    "Schedule": "model",
    "UNINFORMATIVE_LOG_SD": "model",
    "boot_features": "model",
    "independent_priors": "model",
    "mem_features": "model",
    "predict_log": "model",
    "schedule": "model",
    "stage_layers": "model",
    "PlanRow": "plan",
    "WorkloadSpec": "plan",
    "cluster_layouts": "plan",
    "parse_workload": "plan",
    "plan_html": "plan",
    "plan_lines": "plan",
    "plan_rows": "plan",
    "write_plan_csv": "plan",
}
__all__ = [
    "BOOT_PARAMS",
    "MEM_PARAMS",
    "METRICS",
    "PARAMS",
    "SEEDS_FITTED",
    "UNINFORMATIVE_LOG_SD",
    "Band",
    "Candidate",
    "Decision",
    "Fitted",
    "Hardware",
    "Measured",
    "Observation",
    "Param",
    "PlanRow",
    "PlannerError",
    "Point",
    "Prediction",
    "Schedule",
    "Workload",
    "WorkloadSpec",
    "boot_features",
    "cluster_layouts",
    "decide",
    "fit",
    "independent_priors",
    "load_fitted",
    "load_measured",
    "mem_features",
    "parse_workload",
    "plan_html",
    "plan_lines",
    "plan_rows",
    "predict_log",
    "prior_only",
    "read_points_file",
    "schedule",
    "skip_third_repeat",
    "stage_layers",
    "write_plan_csv",
]
__getattr__ = lazy(__name__, _NAMES)
