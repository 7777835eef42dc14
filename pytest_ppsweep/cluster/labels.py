"""Labels that identify a run's ranks on every backend, so leftovers can be found and reaped:
docker labels on containers, environment variables (``PPSWEEP_RUN``…) on processes.

The label keys are a public contract (``docker ps --filter label=ppsweep.run=<run id>``, the
``PPSWEEP_RUN`` of a rank's environment): they are spelled here only.
"""

from __future__ import annotations

from collections.abc import Mapping

RUN_LABEL = "ppsweep.run"
CLUSTER_LABEL = "ppsweep.cluster"
CONFIG_LABEL = "ppsweep.config"
NODE_RANK_LABEL = "ppsweep.node_rank"
LABELS = (RUN_LABEL, CLUSTER_LABEL, CONFIG_LABEL, NODE_RANK_LABEL)


def label_env(label: str) -> str:
    """``ppsweep.run`` → ``PPSWEEP_RUN`` (labels of local processes live in their environment)."""
    return label.upper().replace(".", "_")


RUN_ENV = label_env(RUN_LABEL)  # PPSWEEP_RUN
CLUSTER_ENV = label_env(CLUSTER_LABEL)  # PPSWEEP_CLUSTER
CONFIG_ENV = label_env(CONFIG_LABEL)  # PPSWEEP_CONFIG
NODE_RANK_ENV = label_env(NODE_RANK_LABEL)  # PPSWEEP_NODE_RANK


def rank_labels(run_id: str, cluster: str, config_id: str, node_rank: int | str
                ) -> dict[str, str]:
    """The labels of one rank: run, cluster, layout and node rank."""
    return {RUN_LABEL: run_id, CLUSTER_LABEL: cluster, CONFIG_LABEL: config_id,
            NODE_RANK_LABEL: str(node_rank)}


def rank_label(node_rank: int | str, group: str = "") -> str:
    """A rank's node-rank label: its node rank, prefixed by its server group's label in a
    layout of several groups (``decode0-1``), whose node ranks each count from 0: two ranks of
    one layout never share one (the stray sweep, the reaper and container names key on it)."""
    return f"{group}-{node_rank}" if group else str(node_rank)


def labels_env(labels: Mapping[str, object]) -> dict[str, str]:
    """``labels`` as the environment variables a process rank carries them in."""
    return {label_env(k): str(v) for k, v in labels.items()}
