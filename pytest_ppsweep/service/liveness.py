"""Liveness of a booted layout: every rank watched from health until teardown.

Once a layout is healthy, a small thread per server group
(:class:`~pytest_ppsweep.service.launch.GroupService`) polls, every ``interval_s`` (0.25 s by
default, bounded):

* every rank's handle (``RankHandle.poll``: a local process, an SSH process group, a container's
  state on the docker daemon): a rank that ends is dead, whatever its exit code;
* every rank's log, followed as it grows: a fatal line (``logscan``: OOM, Traceback, NCCL…)
  means the layout is broken even while its processes still run;
* the dummy ``/health`` of every rank ≥ 1 (SGLang contract §1.1), every ``health_every_s``: a
  refused port twice in a row, or no answer for ``health_stall_s``, is a dead rank (remote
  backends whose ``poll`` may lag behind). Rank 0 is not probed: its ``/health`` runs a
  generation through every stage and is slow while a round runs.

The first death is kept (:attr:`Liveness.death`) and :attr:`Liveness.died` (a
``threading.Event``) is set: the load generator takes that event as its cancel signal, so the
running round is cut at once, and every later test of the layout fails with the same cause.

Times in a death's message: the wall clock in UTC (to find the moment in the rank logs) and
the real seconds since the layout became healthy, e.g. ``node 2 (127.0.62.3) rank exited with
code -9 at 09:58:01 UTC (12.4 s after healthy)``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import requests

from pytest_ppsweep.matrix.model import HEALTH_STALL_S
from pytest_ppsweep.service.logscan import (
    SETTLE_S,
    Finding,
    LogFollower,
    LogScanner,
    blame,
    exit_text,
    node_of_log,
    settle,
)

POLL_S = 0.25  # exits and log lines
HEALTH_EVERY_S = 1.0  # ranks ≥ 1's dummy /health
WATCH_HEALTH_TIMEOUT_S = 2.0
REFUSED_TWICE = 2


class Watched(Protocol):
    """What the watch needs of a booted server group (launch.GroupService is one: each group of
    a layout is watched on its own, all of them setting one ``died`` event)."""

    scanner: LogScanner

    @property
    def log_paths(self) -> list[Path]: ...

    def address(self, node_rank: int) -> str: ...

    def url(self, node_rank: int) -> str: ...

    def exited(self) -> list[tuple[int, int]]: ...


@dataclass(frozen=True)
class Death:
    """Why a layout is dead: which rank, what happened, when (UTC wall clock, real seconds
    since the watch started, i.e. since the layout was healthy)."""

    node_rank: int
    address: str
    what: str
    wall: float
    after_s: float

    def __str__(self) -> str:
        clock = time.strftime("%H:%M:%S", time.gmtime(self.wall))
        return (
            f"node {self.node_rank} ({self.address}) {self.what} at {clock} UTC "
            f"({self.after_s:.1f} s after healthy)"
        )


class LayoutDead(RuntimeError):
    """A rank of a booted layout died: the running round was aborted, the layout's tests fail
    with this cause (its first line is the :class:`Death`)."""

    def __init__(self, message: str, death: Death | None = None) -> None:
        super().__init__(message)
        self.death = death


class Liveness:
    """Watches one booted service from :meth:`start` until :meth:`stop` (or the first death)."""

    def __init__(
        self,
        service: Watched,
        *,
        interval_s: float = POLL_S,
        health_every_s: float = HEALTH_EVERY_S,
        health_timeout_s: float = WATCH_HEALTH_TIMEOUT_S,
        health_stall_s: float = HEALTH_STALL_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        probe: Callable[[str, float], int | str] | None = None,
        settle_s: float = SETTLE_S,
        died: threading.Event | None = None,
    ) -> None:
        """``died``: the event to set at the first death (a layout of several groups shares one
        among its groups' watches); None: an event of its own."""
        if not 0 < interval_s <= 5.0:
            raise ValueError(f"liveness poll interval must be in (0, 5] s: {interval_s}")
        self.service = service
        self.interval_s = interval_s
        self.health_every_s = health_every_s
        self.health_timeout_s = health_timeout_s
        self.health_stall_s = health_stall_s
        self.clock, self.wall = clock, wall
        self.probe = probe or probe_health
        self.settle_s = settle_s
        self.died = died if died is not None else threading.Event()
        self.death: Death | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = clock()
        self._followers = [LogFollower(p) for p in service.log_paths]
        self._findings: list[Finding] = []
        self._last_health = float("-inf")
        self._refused: dict[int, int] = {}
        self._silent_since: dict[int, float] = {}
        self._lock = threading.RLock()  # check() runs in the thread and in a caller's
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ppsweep-health")
        self._health: Future[Death | None] | None = None

    @property
    def reason(self) -> str | None:
        return None if self.death is None else str(self.death)

    def start(self) -> Liveness:
        self._started = self.clock()
        self._thread = threading.Thread(target=self._run, name="ppsweep-liveness", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (idempotent; the ranks' own stop must not read as a death)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.health_timeout_s + 2 * self.interval_s + 1.0)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.check() is not None:
                    return
            except Exception:  # a probe's surprise must not end the watch
                pass
            self._stop.wait(self.interval_s)

    def _dead(self, node_rank: int, what: str, when: tuple[float, float] | None = None
              ) -> Death | None:
        wall, now = when if when is not None else (self.wall(), self.clock())
        with self._lock:
            if self.death is None and not self._stop.is_set():  # teardown's stop is no death
                self.death = Death(
                    node_rank, self.service.address(node_rank), what, wall,
                    now - self._started,
                )
                self.died.set()
            return self.death

    def check(self) -> Death | None:
        """One poll of every rank; the death found (kept, and :attr:`died` set), or None.

        The watch thread calls it every ``interval_s``; a caller may too (before a test: a rank
        that died a moment ago is seen without waiting for the next poll)."""
        with self._lock:
            return self._check()

    def _check(self) -> Death | None:
        if self.death is not None or self._stop.is_set():
            return self.death
        svc = self.service
        self._read()
        exited = svc.exited()
        if self._stop.is_set():
            return None
        if exited or self._findings:
            return self._name_death()
        now = self.clock()
        # The probes of ranks ≥ 1 run beside the poll: a node that times out must not hold
        # back the next look at exits and log lines.
        pending = self._health
        if now - self._last_health >= self.health_every_s and (pending is None or pending.done()):
            self._last_health = now
            self._health = self._pool.submit(self._check_health, now)
        return self.death

    def _read(self) -> None:
        svc = self.service
        for i, follower in enumerate(self._followers):
            first, lines = follower.new_lines()
            self._findings += svc.scanner.scan(lines, svc.log_paths[i].name, first)

    def _name_death(self) -> Death | None:
        """A rank exited or a fatal line was logged: the death is dated now, then the other
        nodes' last lines and exits are let in (logscan.settle: a rank's own line may land after
        its peers' lines about it, a killed rank's exit after them) and the death is named
        where it happened (logscan.blame)."""
        when = (self.wall(), self.clock())
        n = len(self._followers)

        def look() -> tuple[object, bool]:
            self._read()
            exited = self.service.exited()
            # new fatal lines and exits, not log growth: a rank still serving keeps logging
            return (len(self._findings), tuple(exited)), len(exited) >= n

        settle(look, limit_s=self.settle_s, sleep=self._stop.wait)
        if self._stop.is_set():
            return None
        exited = self.service.exited()
        who = blame(self._findings, exited, lambda f: node_of_log(self.service.log_paths, f))
        if who is None:
            return None
        parts = []
        if who.code is not None:
            others = [f"node {o} code {exit_text(c)}" for o, c in exited if o != who.node]
            also = f" (also ended: {', '.join(others)})" if others else ""
            parts.append(f"rank exited with code {exit_text(who.code)}{also}")
        if who.finding is not None:
            f = who.finding
            parts.append(f"fatal log line {f.source}:{f.line_no}: [{f.kind}] "
                         f"{f.line.strip()[:200]}")
        return self._dead(who.node, "; ".join(parts), when)

    def _check_health(self, now: float) -> Death | None:
        for r in range(1, len(self._followers)):
            if self._stop.is_set():
                return None
            answer = self.probe(self.service.url(r), self.health_timeout_s)
            if answer == 200:
                self._refused.pop(r, None)
                self._silent_since.pop(r, None)
                continue
            since = self._silent_since.setdefault(r, now)
            self._refused[r] = self._refused.get(r, 0) + 1 if answer == "refused" else 0
            if self._refused[r] >= REFUSED_TWICE or now - since >= self.health_stall_s:
                shown = answer if isinstance(answer, str) else f"HTTP {answer}"
                return self._dead(
                    r, f"rank /health not answering ({shown}) for {now - since:.1f} s"
                )
        return None


def probe_health(url: str, timeout: float) -> int | str:
    """``GET /health`` of a rank: its HTTP status, ``"refused"`` or ``"timeout"``."""
    try:
        return requests.get(f"{url}/health", timeout=timeout).status_code
    except requests.Timeout:
        return "timeout"
    except requests.RequestException:
        return "refused"
