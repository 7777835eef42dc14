"""Step 1, the sweep file: the frozen model (model), its schema and the parser that validates it
(parse).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.axes import (
        AXIS_SHORT,
        DEFAULT_MAX_POINTS,
        EP_SPANNING_A2A,
        LAYOUT_AXES,
        UNSET,
        Axis,
        axis_tag,
        expand,
        parse_axes,
        point_facts,
    )
    from pytest_ppsweep.matrix.model import (
        Cluster,
        Config,
        Host,
        NoClusterFits,
        Sweep,
        Workload,
        cluster_for,
    )
    from pytest_ppsweep.matrix.parse import (
        ENV_PLACEHOLDERS,
        load,
    )
    from pytest_ppsweep.matrix.schema import (
        CLUSTER_KEYS,
        COMPARE_KEYS,
        CONFIG_KEYS,
        HOST_KEYS,
        INT_LIMIT,
        PLUGIN_OWNED_FLAGS,
        SPREAD_RULES,
        SWEEP_KEYS,
        TOP_KEYS,
        WORKLOAD_KEYS,
        MatrixError,
        N,
        Reader,
        shown_value,
    )

_NAMES = {
    "AXIS_SHORT": "axes",
    "Axis": "axes",
    "DEFAULT_MAX_POINTS": "axes",
    "EP_SPANNING_A2A": "axes",
    "LAYOUT_AXES": "axes",
    "UNSET": "axes",
    "axis_tag": "axes",
    "expand": "axes",
    "parse_axes": "axes",
    "point_facts": "axes",
    "Cluster": "model",
    "Config": "model",
    "Host": "model",
    "NoClusterFits": "model",
    "Sweep": "model",
    "Workload": "model",
    "cluster_for": "model",
    "ENV_PLACEHOLDERS": "parse",
    "load": "parse",
    "CLUSTER_KEYS": "schema",
    "COMPARE_KEYS": "schema",
    "CONFIG_KEYS": "schema",
    "HOST_KEYS": "schema",
    "INT_LIMIT": "schema",
    "MatrixError": "schema",
    "N": "schema",
    "PLUGIN_OWNED_FLAGS": "schema",
    "Reader": "schema",
    "SPREAD_RULES": "schema",
    "SWEEP_KEYS": "schema",
    "TOP_KEYS": "schema",
    "WORKLOAD_KEYS": "schema",
    "shown_value": "schema",
}
__all__ = [
    "AXIS_SHORT",
    "CLUSTER_KEYS",
    "COMPARE_KEYS",
    "CONFIG_KEYS",
    "DEFAULT_MAX_POINTS",
    "ENV_PLACEHOLDERS",
    "EP_SPANNING_A2A",
    "HOST_KEYS",
    "INT_LIMIT",
    "LAYOUT_AXES",
    "PLUGIN_OWNED_FLAGS",
    "SPREAD_RULES",
    "SWEEP_KEYS",
    "TOP_KEYS",
    "UNSET",
    "WORKLOAD_KEYS",
    "Axis",
    "Cluster",
    "Config",
    "Host",
    "MatrixError",
    "N",
    "NoClusterFits",
    "Reader",
    "Sweep",
    "Workload",
    "axis_tag",
    "cluster_for",
    "expand",
    "load",
    "parse_axes",
    "point_facts",
    "shown_value",
]
__getattr__ = lazy(__name__, _NAMES)
