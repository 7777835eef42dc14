"""The cluster kinds a sweep file may name, as data: the launchers each takes, where its nodes
come from and the keys only it takes; and the launchers whose ranks run in ``[sweep] image``.

The sweep file is read before anything of cluster/ is imported (matrix/ is the first layer), so
the code of each kind (cluster/backends.py registers it) is not asked here; this table says the
same pairs, and tests/cluster/test_backends.py keeps the two equal. A new kind is a row here
besides its module and registration there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# each launcher, and whether its ranks are containers of [sweep] image (the sweep must name one)
NEEDS_IMAGE: Mapping[str, bool] = {"process": False, "docker": True}
LAUNCHERS = tuple(NEEDS_IMAGE)

SLURM_KEYS = ("nodes", "jobid", "partition", "account", "time", "request_gpus",
              "salloc_options", "srun_options", "container_image", "login", "exclusive",
              "cpus_per_task", "mem", "gres", "on_limit", "time_margin_s", "container_cache")


@dataclass(frozen=True)
class ClusterKind:
    """One ``kind`` of ``[clusters.<name>]``."""

    launchers: tuple[str, ...]  # the launchers it takes
    launchers_hint: str  # what it starts, said when another launcher is given
    nodes: str  # "hosts": listed in the file; "count": an allocation's, sized by `nodes`
    own_keys: tuple[str, ...] = ()  # keys only this kind takes


CLUSTER_KINDS: Mapping[str, ClusterKind] = {
    "local": ClusterKind(("process", "docker"), "processes or containers on this machine",
                         "hosts"),
    "ssh": ClusterKind(("process", "docker"), "processes or containers over SSH", "hosts"),
    "slurm": ClusterKind(("process",), "processes (slurm: steps, in a container with "
                         "container_image)", "count", SLURM_KEYS),
}


def pairs() -> set[tuple[str, str]]:
    """Every (kind, launcher) a sweep file may name."""
    return {(kind, launcher) for kind, spec in CLUSTER_KINDS.items() for launcher in spec.launchers}


def owner_of(key: str) -> str:
    """The kind that takes ``key`` alone ("" when every kind takes it)."""
    return next((kind for kind, spec in CLUSTER_KINDS.items() if key in spec.own_keys), "")
