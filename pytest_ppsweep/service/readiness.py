"""Wait for a booting service: bounded, with progress, failing fast.

Ready means rank 0's ``/health`` answers 200 (it answers 503 until the warmup ran, contract
§1.2) and every other rank's dummy ``/health`` answers 200 (§1.1). While waiting, every rank's
log is followed: the first fatal line, or a rank process that exits, ends the wait at once with
the evidence in the message instead of letting the user wait for the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from pytest_ppsweep.matrix.model import Config
from pytest_ppsweep.service.logscan import Finding, LogFollower, LogScanner, root_cause
from pytest_ppsweep.service.probe import health


class Booting(Protocol):
    """What the wait needs of a service being booted (launch.Service is one)."""

    config: Config
    scanner: LogScanner
    progress: Callable[[str], None]

    @property
    def specs(self) -> Sequence[object]: ...

    @property
    def log_paths(self) -> list[Path]: ...

    def url(self, node_rank: int) -> str: ...

    def exited(self) -> list[tuple[int, int]]: ...

    def findings(self) -> list[Finding]: ...

    def log_tail(self, lines: int = 25) -> str: ...


# Rank 0's /health runs a one-token generation through every stage (contract §1.2): on a busy
# CPU server that takes seconds, so a short probe timeout would read as "refused" forever.
HEALTH_TIMEOUT_S = 10.0


class BootFailed(RuntimeError):
    """A configuration did not become ready; the message carries the reason and log tails."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message.splitlines()[0]


def _fail(service: Booting, reason: str, findings: Sequence[Finding] = ()) -> BootFailed:
    shown = "\n".join(str(f) for f in findings[:20])
    evidence = f"\nmatching log lines:\n{shown}" if shown else ""
    root = root_cause(findings)
    cause = f": {root.line.strip()[:200]}" if root else ""
    return BootFailed(
        f"{service.config.id}: boot failed: {reason}{cause}{evidence}\n{service.log_tail()}",
        reason=f"{reason}{cause}",
    )


def wait_until_ready(
    service: Booting,
    timeout_s: float,
    poll_s: float = 0.2,
    progress_every_s: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
) -> float:
    """Return the seconds it took until every rank was healthy; raise :class:`BootFailed`."""
    start = clock()
    followers = [LogFollower(p) for p in service.log_paths]
    last_progress = start
    n = len(service.specs)
    while True:
        for i, follower in enumerate(followers):
            first, lines = follower.new_lines()
            found = service.scanner.scan(lines, service.log_paths[i].name, first)
            if found:
                # Every node's log so far: the root cause may be on another node.
                raise _fail(service, f"fatal line in node{i}'s log", service.findings() or found)
        dead = service.exited()
        if dead:
            desc = ", ".join(f"node{r} exited with code {rc}" for r, rc in dead)
            raise _fail(service, desc, service.findings())
        codes = [health(service.url(r), timeout=HEALTH_TIMEOUT_S) for r in range(n)]
        elapsed = clock() - start
        if codes[0] == 200 and all(c == 200 for c in codes[1:]):
            service.progress(f"{service.config.id}: healthy after {elapsed:.1f} s real")
            return elapsed
        if elapsed > timeout_s:
            raise _fail(
                service,
                f"not healthy within {timeout_s:.0f} s (rank 0 /health: {codes[0] or 'refused'}, "
                f"other ranks ready: {sum(c == 200 for c in codes[1:])}/{n - 1})",
            )
        if clock() - last_progress >= progress_every_s:
            last_progress = clock()
            service.progress(
                f"{service.config.id}: booting {elapsed:.0f} s / {timeout_s:.0f} s — rank 0 "
                f"/health {codes[0] or 'refused'}, ranks ≥ 1 ready "
                f"{sum(c == 200 for c in codes[1:])}/{n - 1}"
            )
        time.sleep(poll_s)
