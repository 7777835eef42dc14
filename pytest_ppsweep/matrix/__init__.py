"""Step 1, the sweep file: the frozen model (model), its schema and the parser that validates it
(parse).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.commspec import (
        COMM_KEYS,
        COMM_TOOLS,
        CommSpec,
        parse_size,
        read_comm,
        size_label,
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
    "COMM_KEYS": "commspec",
    "COMM_TOOLS": "commspec",
    "CommSpec": "commspec",
    "parse_size": "commspec",
    "read_comm": "commspec",
    "size_label": "commspec",
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
    "CLUSTER_KEYS",
    "COMM_KEYS",
    "COMM_TOOLS",
    "CONFIG_KEYS",
    "ENV_PLACEHOLDERS",
    "HOST_KEYS",
    "INT_LIMIT",
    "PLUGIN_OWNED_FLAGS",
    "SPREAD_RULES",
    "SWEEP_KEYS",
    "TOP_KEYS",
    "WORKLOAD_KEYS",
    "Cluster",
    "CommSpec",
    "Config",
    "Host",
    "MatrixError",
    "N",
    "NoClusterFits",
    "Reader",
    "Sweep",
    "Workload",
    "cluster_for",
    "load",
    "parse_size",
    "read_comm",
    "shown_value",
    "size_label",
]
__getattr__ = lazy(__name__, _NAMES)
