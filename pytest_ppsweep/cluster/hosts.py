"""Run commands on a node. ``LocalHost`` runs them on this machine (loopback "nodes").

Every backend has the same small surface (testinfra's habit): ``run(argv) -> CommandResult`` for
short commands and ``spawn(...)`` for a long-lived rank process whose output goes to a log file.
Commands are argument lists, never shell strings, so nothing needs quoting here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_ppsweep.cluster.base import CommandResult, HostError, RankHandle
from pytest_ppsweep.cluster.labels import labels_env
from pytest_ppsweep.cluster.ports import owned_by_group
from pytest_ppsweep.cluster.strays import sweep

if TYPE_CHECKING:
    from pytest_ppsweep.cluster.rankspec import RankSpec


class LocalProcess:
    """A rank started in its own session, so the whole process group can be stopped; with
    ``labels`` (a rank's), stopping also stops the processes that left the group
    (:mod:`pytest_ppsweep.cluster.strays`), their pids kept in ``strays``."""
    def __init__(self, popen: subprocess.Popen[bytes], host: str, address: str = "127.0.0.1",
                 labels: Mapping[str, str] | None = None) -> None:
        self._popen = popen
        self.host = host
        self.address = address
        self.labels = dict(labels or {})
        self.strays: list[int] = []
        self.pid = popen.pid
        self.pgid = os.getpgid(popen.pid)

    def poll(self) -> int | None:
        return self._popen.poll()

    def owns_port(self, address: str, port: int) -> bool | None:
        """Whether this rank (a process of its group) holds the socket listening on
        ``address:port``; None when nothing listens there or its holder cannot be seen."""
        return owned_by_group(address, port, self.pgid)

    def stop(self, grace_s: float = 5.0) -> int | None:
        """SIGTERM the group, SIGKILL what is left after ``grace_s``; returns the exit code."""
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            try:
                self._popen.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(self.pgid):
                break
            # The leader is gone but children of the group may still run: next signal.
            deadline = time.monotonic() + wait_s
            while _group_alive(self.pgid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not _group_alive(self.pgid):
                break
        if self.labels:
            self.strays += sweep(LocalHost(self.host, self.address), self.labels)
        return self._popen.poll()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LocalHost:
    """A node on this machine, identified by the loopback address its rank binds."""
    def __init__(self, name: str, address: str) -> None:
        self.name = name
        self.address = address

    def run(self, argv: Sequence[str], timeout: float = 60.0) -> CommandResult:
        try:
            proc = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError as exc:
            raise HostError(f"host {self.name}: cannot run {argv[0]!r}: {exc}") from None
        except subprocess.TimeoutExpired:
            raise HostError(
                f"host {self.name}: {' '.join(argv)} did not finish within {timeout:.0f} s"
            ) from None
        return CommandResult(self.name, tuple(argv), proc.returncode, proc.stdout, proc.stderr)

    def spawn(
        self, argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> LocalProcess:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            try:
                popen = subprocess.Popen(
                    list(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **env},
                    cwd=cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                raise HostError(f"host {self.name}: cannot start {argv[0]!r}: {exc}") from None
        return LocalProcess(popen, self.name, self.address, labels)


class LocalLauncher:
    """Ranks as processes on this machine, each in its own session (loopback "nodes")."""
    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> RankHandle:
        # Labels travel as environment variables: the only label a plain process can carry,
        # and what reap.find_local looks for after a crash.
        env = {**spec.env, **labels_env(labels)}
        return LocalHost(spec.host, spec.address).spawn(spec.argv, env, log_path, labels=labels)
