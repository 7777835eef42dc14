"""``kind = "local"``, ``launcher = "process"``: ranks as processes on this machine, one per
loopback "node" (cluster/hosts.py). This machine is shared with other sessions: its leftovers
are only the ranks of other runs that would take this cluster's ports."""

from __future__ import annotations

from pytest_ppsweep.cluster.backend import Backend, NodeCheck
from pytest_ppsweep.cluster.base import CommandHost, Launcher
from pytest_ppsweep.cluster.hosts import LocalHost, LocalLauncher
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Host, Sweep


class LocalProcessBackend(Backend):
    kind = "local"
    launcher_name = "process"
    on_this_machine = True
    shares_files = True
    reaps_by_label = False
    flags_where = "on this machine, with the ranks' interpreter and environment"
    engine_here = True

    def host(self, host: Host, registry: Registry | None = None) -> CommandHost:
        return LocalHost(host.name, host.address)

    def launcher(self, sweep: Sweep | None = None, registry: Registry | None = None) -> Launcher:
        return LocalLauncher()

    def node_checks(self, rank0: bool) -> tuple[NodeCheck, ...]:
        # one machine: the module is looked for once
        return ("module", "flags", "local_ports") if rank0 else ("local_ports",)
