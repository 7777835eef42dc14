"""Ranks as processes on the nodes, started over SSH.

A rank is started detached (``setsid -f``) so it outlives the SSH session; ``setsid`` makes it
the leader of its own process group, whose id (= its pid) is recorded so that stopping it stops
every process it spawned. Its output goes to a log file on the node, which a thread streams over
SSH (``tail -F --pid``) into the local ``log_path`` while the rank runs, so the readiness log
watch and the log scan work exactly as for local ranks. The rank's exit status is written by a
small ``sh`` wrapper next to the log, which is how a detached process's status survives.

The labels (run id, cluster, configuration id, node rank) travel in the rank's environment as
``PPSWEEP_RUN``, ``PPSWEEP_CLUSTER``, ``PPSWEEP_CONFIG`` and ``PPSWEEP_NODE_RANK`` (as for local
ranks, :func:`pytest_ppsweep.cluster.labels.label_env`): :mod:`pytest_ppsweep.cluster.reap` finds
leftover ranks of crashed runs by them.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.labels import CONFIG_LABEL, RUN_LABEL, labels_env
from pytest_ppsweep.cluster.ssh import HostConnectionError, SshHost
from pytest_ppsweep.cluster.strays import sweep

if TYPE_CHECKING:
    from pytest_ppsweep.cluster.rankspec import RankSpec

REMOTE_ROOT = "/tmp/ppsweep-ranks"  # <root>/<run>/<config>/node<r>.{log,rc} on each node
KILLED = -9  # status of a rank that ended without its wrapper writing one (killed with its group)
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: str) -> str:
    return _SAFE.sub("_", text).strip("_") or "none"


def remote_dir(labels: Mapping[str, str]) -> str:
    run = safe_name(labels.get(RUN_LABEL, "") or "run")
    config = safe_name(labels.get(CONFIG_LABEL, "") or "config")
    return f"{REMOTE_ROOT}/{run}/{config}"


def start_script(spec: RankSpec, labels: Mapping[str, str], rdir: str, stem: str) -> str:
    """The shell line that starts the rank detached and prints its pid (= process group id).

    ``setsid -f`` (not ``cmd &``, which would start the rank with SIGINT ignored) runs a small
    ``sh`` wrapper as the leader of a new session; it writes its pid, runs the rank with the
    log as stdout/stderr and records the rank's exit status. The environment (the rank's and the
    labels) is set on the wrapper, so every process of the group carries the labels. The
    wrapper traps TERM/INT/HUP with a handler (the rank keeps the default dispositions) so it
    outlives the rank; the rank runs in a subshell so that the wrapper's own messages (dash
    prints "Terminated") go to /dev/null, not into the log.
    """
    env = {**spec.env, **labels_env(labels)}
    q = shlex.quote
    log, rc, pidf = (f"{rdir}/{stem}.{ext}" for ext in ("log", "rc", "pid"))
    wrapper = (
        f"echo $$ > {q(pidf)}; trap : TERM INT HUP; "
        f'(exec "$@" > {q(log)} 2>&1 < /dev/null); echo $? > {q(rc)}'
    )
    command = shlex.join(
        [
            "setsid",
            "-f",
            "env",
            *(f"{k}={v}" for k, v in env.items()),
            "sh",
            "-c",
            wrapper,
            "ppsweep-rank",
            *spec.argv,
        ]
    )
    return (
        f"umask 022 && mkdir -p {q(rdir)} && rm -f {q(rc)} {q(pidf)} && cd {q(rdir)} && "
        f"{command} > /dev/null 2>&1 < /dev/null && i=0 && "
        f"while [ ! -s {q(pidf)} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done && "
        f"cat {q(pidf)}"
    )


def stop_script(pgid: int, grace_s: float) -> str:
    """TERM the group, KILL it after ``grace_s``; exit 0 once the group is gone.

    ``kill -SIG -PGID`` without ``--``: dash's builtin kill rejects ``--``.
    """
    g = f"-{int(pgid)}"
    ticks = max(1, int(grace_s * 10))
    return (
        f"kill -TERM {g} 2>/dev/null || exit 0; i=0; "
        f"while kill -0 {g} 2>/dev/null; do i=$((i+1)); [ $i -gt {ticks} ] && break; "
        f"sleep 0.1; done; "
        f"kill -0 {g} 2>/dev/null || exit 0; kill -KILL {g} 2>/dev/null; i=0; "
        f"while kill -0 {g} 2>/dev/null; do i=$((i+1)); [ $i -gt 50 ] && exit 1; sleep 0.1; "
        f"done; exit 0"
    )


class SshRank:
    """A rank process on a node: poll, stop, and its log streamed into ``log_path``."""

    def __init__(
        self, host: SshHost, node_rank: int, pid: int, rdir: str, stem: str, log_path: Path,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.host = host
        self.labels = dict(labels or {})
        self.strays: list[int] = []  # pids that had left the group, stopped by stop()
        self.node_rank = node_rank
        self.pid = pid
        self.pgid = pid  # setsid: the rank leads its own group
        self.remote_log = f"{rdir}/{stem}.log"
        self.remote_rc = f"{rdir}/{stem}.rc"
        self.rdir = rdir
        self.log_path = log_path
        self._rc: int | None = None
        self._gone = threading.Event()  # the rank's process has ended (seen by the tail)
        self._stopping = threading.Event()
        self._copied = 0
        self._lock = threading.Lock()
        self._stopped = False
        self._tail = threading.Thread(
            target=self._follow, name=f"ppsweep-tail-{host.name}", daemon=True
        )
        self._tail.start()

    def __repr__(self) -> str:
        return f"SshRank({self.host.name}, node{self.node_rank}, pgid {self.pgid})"

    # -- log streaming ------------------------------------------------------------------------

    def _follow(self) -> None:
        """Stream the node's log into log_path until the rank has ended and its log is read.

        A dropped stream is resumed where it stopped (``tail -c +N``), up to 30 attempts."""
        attempts = 0
        with self.log_path.open("ab") as out:
            while True:
                error = ""
                try:
                    if self._stream_once(out):
                        self._gone.set()
                        return
                    error = "tail ended early"
                except (HostError, OSError, EOFError) as exc:
                    error = str(exc)
                attempts += 1
                if attempts > 30 or (self._stopping.is_set() and attempts > 3):
                    out.write(
                        f"[ppsweep] log stream from {self.host.name} lost: {error}\n".encode()
                    )
                    out.flush()
                    return
                time.sleep(1.0)

    def _stream_once(self, out: BinaryIO) -> bool:
        """One ``tail`` over SSH; True once it ended because the rank did (exit status 0)."""
        q = shlex.quote
        # --pid: tail ends once the rank's wrapper has exited and the log is read to the end
        cmd = (
            f"tail -c +{self._copied + 1} -F -s 0.2 --pid={self.pid} {q(self.remote_log)} "
            "2>/dev/null"
        )
        chan = self.host.transport().open_session()
        try:
            chan.exec_command(cmd)
            while True:
                data = chan.recv(65536)
                if not data:
                    break
                out.write(data)
                out.flush()
                self._copied += len(data)
            status = int(chan.recv_exit_status())
        finally:
            chan.close()
        return status == 0

    # -- RankHandle -----------------------------------------------------------------------------

    def _read_rc(self) -> int:
        res = self.host.run(["cat", self.remote_rc], timeout=30)
        text = res.stdout.strip()
        return int(text) if res.ok and text.lstrip("-").isdigit() else KILLED

    def poll(self) -> int | None:
        """The rank's exit status once it has ended, else None (no SSH round trip while the
        log stream runs: the stream ends when the rank does)."""
        if self._rc is not None:
            return self._rc
        if self._gone.is_set():
            with contextlib.suppress(HostError):
                self._rc = self._read_rc()
            return self._rc
        if self._tail.is_alive():
            return None
        # the stream was lost: ask the node
        try:
            alive = self.host.sh(f"kill -0 -{self.pgid} 2>/dev/null", timeout=30).ok
        except HostError:
            return None
        if not alive:
            with contextlib.suppress(HostError):
                self._rc = self._read_rc()
        return self._rc

    def stop(self, grace_s: float = 5.0) -> int | None:
        """SIGTERM the rank's group, SIGKILL it after ``grace_s``; idempotent."""
        with self._lock:
            if self._stopped:
                return self._rc
            self._stopping.set()
            try:
                res = self.host.sh(stop_script(self.pgid, grace_s), timeout=grace_s + 30)
            except HostConnectionError:
                # unreachable: reap.py finds the group by its labels later
                return self._rc
            if not res.ok:
                raise HostError(
                    f"host {self.host.name}: node{self.node_rank}'s process group {self.pgid} "
                    f"survived SIGKILL: {res.stderr.strip()}"
                )
            if self.labels:  # what left the group (its own session) carries the labels
                self.strays += sweep(self.host, self.labels, grace_s)
            self._tail.join(timeout=10)
            if self._rc is None:
                with contextlib.suppress(HostError):
                    self._rc = self._read_rc()
            if self._gone.is_set():
                # the local log holds everything: remove the node's copy
                with contextlib.suppress(HostError):
                    q = shlex.quote
                    self.host.sh(
                        f"rm -f {q(self.remote_log)} {q(self.remote_rc)} "
                        f"{q(self.remote_rc[:-3] + '.pid')}; "
                        f"rmdir {q(self.rdir)} {q(self.rdir.rsplit('/', 1)[0])} 2>/dev/null; true",
                        timeout=30,
                    )
            self._stopped = True
            return self._rc


class SshProcessLauncher:
    """Starts each rank as a detached process on its node over SSH (``launcher = "process"``)."""

    def __init__(self, hosts: Mapping[str, SshHost]) -> None:
        self.hosts = hosts  # by node address

    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> SshRank:
        host = self.hosts[spec.address]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        rdir = remote_dir(labels)
        stem = f"node{spec.node_rank}"
        res = host.sh(start_script(spec, labels, rdir, stem), timeout=60)
        pid_text = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
        if not res.ok or not pid_text.isdigit():
            raise HostError(
                f"host {host.name}: could not start node{spec.node_rank}'s rank "
                f"(exit {res.exit_status}): {res.stderr.strip()[:500]}"
            )
        return SshRank(host, spec.node_rank, int(pid_text), rdir, stem, log_path, labels)
