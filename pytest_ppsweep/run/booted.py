"""A booted layout: the ready service and what was learnt while booting it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pytest_ppsweep.cluster.gpus import GpuMemory
from pytest_ppsweep.matrix.model import Cluster, Config
from pytest_ppsweep.service.launch import LayoutDead, Service
from pytest_ppsweep.service.logscan import Finding
from pytest_ppsweep.service.probe import Topology

__all__ = ["Booted"]


@dataclass
class Booted:
    """A ready service plus what was learnt while booting it."""

    service: Service
    cluster: Cluster
    info: dict[str, Any]
    topology: Topology
    before: list[GpuMemory] = field(default_factory=list)
    # The point measured on this boot when it is not the one that booted it: a point of the
    # same server configuration with another workload (run/boots.py, matrix.model.server_key).
    measures: Config | None = None
    # A layout of several server groups: each group's topology, read from its head node, and
    # its node count (label → (topology, nodes)); empty for one serve group (:attr:`topology`).
    group_topologies: dict[str, tuple[Topology, int]] = field(default_factory=dict)
    # Which of the layout's boots in this run this is (1 … [sweep] boots, run/boots.py): the
    # rounds of a later boot follow the earlier boots' rounds (run/rounds.py).
    boot_no: int = 1

    @property
    def config(self) -> Config:
        """The point measured on this service: the one that booted it, or the workload's point
        that shares its boot."""
        return self.measures if self.measures is not None else self.service.config

    @property
    def boot_id(self) -> str:
        """The point whose boot this is (its service, logs and ranks are under its id)."""
        return self.service.config.id

    def for_point(self, config: Config) -> Booted:
        """This boot, measuring ``config`` (a point of the same server configuration)."""
        return self if config.id == self.boot_id else replace(self, measures=config)

    @property
    def nodes(self) -> int:
        """How many nodes the layout runs on."""
        return len(self.cluster.hosts)

    @property
    def dead(self) -> str | None:
        """Why the layout died after it was healthy (a rank's exit, a fatal log line, a rank
        ≥ 1 whose /health stopped answering), or None while every rank lives."""
        return self.service.dead

    def look(self) -> str | None:
        """:attr:`dead`, the ranks looked at now (not only at the watch's last poll)."""
        self.service.check()
        return self.dead

    def check_alive(self) -> None:
        """Raise :class:`LayoutDead` with the cause when a rank died (before each test and
        round; the ranks are looked at now, not only at the watch's last poll)."""
        if (reason := self.look()) is not None:
            raise LayoutDead(f"{self.service.config.id}: layout dead: {reason}")

    def findings(self) -> list[Finding]:
        """The fatal lines of every rank's log so far (the log scan)."""
        return self.service.findings()

    def log_tail(self) -> str:
        """The last lines of every rank's log, to show with a failure."""
        return self.service.log_tail()

    def evidence(self) -> str:
        """Fatal log lines so far (root cause first) and every node's log tail, for a failure."""
        return self.service.evidence()
