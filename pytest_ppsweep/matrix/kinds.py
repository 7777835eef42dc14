"""The table of cluster kinds, the one source of what a kind is: the launchers each takes,
where its nodes come from, its own settings (the keys only it takes, matrix/kindsettings.py),
and the launchers whose ranks run in ``[sweep] image``.

The sweep file is read before anything of cluster/ is imported (matrix/ is the first layer), so
this table names no code; cluster/backends.py derives its registry of Backends from it (each
(kind, launcher) here must have exactly one Backend there, or cluster/ fails to import). A new
kind is a row here (with its settings type when it has keys of its own), its module
cluster/kind_<name>.py and its Backend's line in cluster/backends.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_ppsweep.matrix.kindsettings import KindSettings
from pytest_ppsweep.matrix.schema import CLUSTER_COMMON_KEYS
from pytest_ppsweep.matrix.slurmsettings import SlurmSettings

# each launcher, and whether its ranks are containers of [sweep] image (the sweep must name one)
NEEDS_IMAGE: Mapping[str, bool] = {"process": False, "docker": True}
LAUNCHERS = tuple(NEEDS_IMAGE)

# where a kind's nodes come from, and the keys that say so
NODES_KEYS: Mapping[str, tuple[str, ...]] = {
    "hosts": (),  # listed in the file (`hosts`, a key every kind knows)
    "count": ("nodes",),  # an allocation's, sized by `nodes` until it is held
}


@dataclass(frozen=True)
class ClusterKind:
    """One ``kind`` of ``[clusters.<name>]``."""

    launchers: tuple[str, ...]  # the launchers it takes
    launchers_hint: str  # what it starts, said when another launcher is given
    nodes: str  # a key of NODES_KEYS
    settings: type[KindSettings] | None = None  # its own keys, read into Cluster.settings

    @property
    def own_keys(self) -> tuple[str, ...]:
        """The keys only this kind takes: those of its nodes, then its settings'."""
        return (*NODES_KEYS[self.nodes], *(self.settings.KEYS if self.settings else ()))

    @property
    def allocated(self) -> bool:
        """Its nodes come from an allocation taken at the start of the run, not from the
        file."""
        return self.nodes == "count"


CLUSTER_KINDS: Mapping[str, ClusterKind] = {
    "local": ClusterKind(("process", "docker"), "processes or containers on this machine",
                         "hosts"),
    "ssh": ClusterKind(("process", "docker"), "processes or containers over SSH", "hosts"),
    "slurm": ClusterKind(("process",), "processes (slurm: steps, in a container with "
                         "container_image)", "count", SlurmSettings),
}

# every key of a [clusters.<name>] table: every kind's, then each kind's own (in the table's
# order: the order "expected one of" lists them in)
CLUSTER_KEYS: tuple[str, ...] = tuple(dict.fromkeys(
    (*CLUSTER_COMMON_KEYS, *(k for spec in CLUSTER_KINDS.values() for k in spec.own_keys))))


def pairs() -> set[tuple[str, str]]:
    """Every (kind, launcher) a sweep file may name."""
    return {(kind, launcher) for kind, spec in CLUSTER_KINDS.items() for launcher in spec.launchers}


def owner_of(key: str) -> str:
    """The kind that takes ``key`` alone ("" when every kind takes it)."""
    return next((kind for kind, spec in CLUSTER_KINDS.items() if key in spec.own_keys), "")
