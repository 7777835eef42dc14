"""Step 1, the sweep file: the frozen model (model), its schema and the parser that validates it
(parse).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import (
        Cluster,
        Config,
        Host,
        NoClusterFits,
        ProfileSpec,
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
        PROFILE_ACTIVITIES,
        PROFILE_KEYS,
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
    "Cluster": "model",
    "Config": "model",
    "Host": "model",
    "NoClusterFits": "model",
    "ProfileSpec": "model",
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
    "PROFILE_ACTIVITIES": "schema",
    "PROFILE_KEYS": "schema",
    "Reader": "schema",
    "SPREAD_RULES": "schema",
    "SWEEP_KEYS": "schema",
    "TOP_KEYS": "schema",
    "WORKLOAD_KEYS": "schema",
    "shown_value": "schema",
}
__all__ = [
    "CLUSTER_KEYS",
    "CONFIG_KEYS",
    "ENV_PLACEHOLDERS",
    "HOST_KEYS",
    "INT_LIMIT",
    "PLUGIN_OWNED_FLAGS",
    "PROFILE_ACTIVITIES",
    "PROFILE_KEYS",
    "SPREAD_RULES",
    "SWEEP_KEYS",
    "TOP_KEYS",
    "WORKLOAD_KEYS",
    "Cluster",
    "Config",
    "Host",
    "MatrixError",
    "N",
    "NoClusterFits",
    "ProfileSpec",
    "Reader",
    "Sweep",
    "Workload",
    "cluster_for",
    "load",
    "shown_value",
]
__getattr__ = lazy(__name__, _NAMES)
