"""What every cluster backend offers: the one small surface launch and measure code sees.

* a *host* runs short commands: ``run(argv, timeout) -> CommandResult`` (nvidia-smi, preflight);
* a *launcher* starts one rank per node and returns a handle with ``poll()`` and ``stop()``; the
  rank's output must end up in the local ``log_path`` while it runs (remote launchers stream it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pytest_ppsweep.cluster.rankspec import RankSpec



@dataclass(frozen=True)
class CommandResult:
    """What a finished command left: its argv, exit status and output."""

    host: str
    command: tuple[str, ...]
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class HostError(RuntimeError):
    """A command could not be run on a host at all (the message names the host)."""


class ClusterStop(RuntimeError):
    """The sweep cannot go on on a cluster (its allocation ends before the next layout would,
    or lost a node, and the sweep file says stop, or no new one fits): the run stops there,
    resumable; the message says why."""


class CommandHost(Protocol):
    """Runs short commands on one node."""

    name: str
    address: str

    def run(self, argv: Sequence[str], timeout: float = 60.0) -> CommandResult: ...


class RankHandle(Protocol):
    """A started rank: whether it still runs, and how to stop it (idempotent). A handle of a
    process rank also has ``strays``: the pids that had left its process group and were
    stopped with it (cluster/strays.py); a container has none (its namespace ends with it)."""

    def poll(self) -> int | None: ...

    def stop(self, grace_s: float = 5.0) -> int | None: ...


class Launcher(Protocol):
    """Starts ranks of one cluster; ``labels`` identify them (run id, config id, node rank)."""

    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> RankHandle: ...
