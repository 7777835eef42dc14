"""Wait for a booting service: bounded, with progress, failing fast.

Ready means rank 0's ``/health`` answers 200 (it answers 503 until the warmup ran, contract
§1.2) and every other rank's dummy ``/health`` answers 200 (§1.1). While waiting, every rank's
log is followed: the first fatal line, or a rank process that exits, ends the wait at once with
the evidence in the message instead of letting the user wait for the timeout.

A healthy answer counts only from the ranks this boot launched: the exits are checked again
after the probes (a rank that died while something else answered on its port fails the boot,
whatever answered), and a port answered by another process than the launched rank (a server
left from an earlier run, ``Booting.impostor``: the emulator's answer echoes another boot token,
or, on this machine, the listening socket belongs to another process) fails the boot at once.

The log lines also give the boot's newest milestone (the engine's milestones, engine/), which a
caller's ``on_status`` shows.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.folder.runfolder import BOOT_FAILURE_TXT
from pytest_ppsweep.matrix.model import Config
from pytest_ppsweep.service.logscan import (
    Blame,
    Finding,
    LogFollower,
    LogScanner,
    blame,
    exit_text,
    node_of_log,
    root_cause,
    settle,
)
from pytest_ppsweep.service.probe import health_and_token


class Booting(Protocol):
    """What the wait needs of a service being booted (launch.GroupService: each server group
    is waited for in turn; launch.Service too: a boot failure names its ranks across groups)."""

    config: Config
    scanner: LogScanner
    progress: Callable[[str], None]

    @property
    def specs(self) -> Sequence[object]: ...

    @property
    def log_paths(self) -> list[Path]: ...

    def url(self, node_rank: int) -> str: ...

    def exited(self) -> list[tuple[int, int]]: ...

    def impostor(self, node_rank: int, token: str | None) -> str | None: ...

    def findings(self) -> list[Finding]: ...

    def log_tail(self, lines: int = 25) -> str: ...


# Rank 0's /health runs a one-token generation through every stage (contract §1.2): on a busy
# CPU server that takes seconds, so a short probe timeout would read as "refused" forever.
HEALTH_TIMEOUT_S = 10.0


@functools.cache
def _milestones(name: str) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(m) for m in engine_of(name).milestones))


def milestone(line: str, engine: Engine | None = None) -> str | None:
    """The boot milestone a log line marks (the engine's, the default engine's when None),
    or None."""
    found = _milestones((engine or engine_of()).name).search(line)
    return found.group(0) if found else None


@dataclass(frozen=True)
class BootStatus:
    """Where a boot stands: real seconds waited of the timeout, ranks answering /health 200,
    and the newest milestone of the boot: the furthest any rank's log reached, with the first
    rank that reached it (``node1: Load weight end``, or "")."""

    config_id: str
    elapsed_s: float
    timeout_s: float
    ready: int
    ranks: int
    milestone: str = ""


class BootFailed(RuntimeError):
    """A configuration did not become ready. The message is the short summary for a terminal
    (at most :data:`SUMMARY_LINES` lines: the reason, the root-cause line, a few other fatal
    lines, the root-cause node's last lines); ``details`` is everything (every fatal line,
    every node's log tail), also written to ``evidence_path`` beside the node logs."""

    def __init__(self, message: str, reason: str = "", details: str = "",
                 evidence_path: Path | None = None, cause: str = "") -> None:
        """``cause``: the log-scan kind of the root-cause line (``cuda-oom``, ``nccl``…; ""
        when no line says why: a timeout, a rank that exited without one)."""
        super().__init__(message)
        self.cause = cause
        self.reason = reason or message.splitlines()[0]
        self.details = details or message
        self.evidence_path = evidence_path


SUMMARY_LINES = 15
_SHOWN_FINDINGS = 3
_TAIL_LINES = 6
EVIDENCE_FILE = BOOT_FAILURE_TXT


def node_of(service: Booting, finding: Finding) -> int | None:
    """The node whose log holds ``finding``, None when not one of them."""
    return node_of_log(service.log_paths, finding)


def _cut(line: str, width: int = 200) -> str:
    line = line.rstrip("\n")
    return line if len(line) <= width else line[: width - 1] + "…"


def _section(tails: str, name: str) -> list[str]:
    """The non-empty lines of ``name``'s part of :meth:`Booting.log_tail` (secrets scrubbed
    there), headed ``--- <name> (last N lines) ---``."""
    out: list[str] = []
    inside = False
    for line in tails.splitlines():
        if line.startswith("--- ") and line.endswith(" ---"):
            inside = line.startswith(f"--- {name} (")
        elif inside and line.strip():
            out.append(line)
    return out


def boot_failure(service: Booting, reason: str, findings: Sequence[Finding] = (),
                 blamed: Blame | None = None) -> BootFailed:
    """The one home of a boot failure's message: ``reason``, the root-cause line (``blamed``'s,
    else :func:`~pytest_ppsweep.service.logscan.root_cause` of ``findings``), the tail of the
    node named (``blamed``'s, else the one whose log holds the root cause, else node 0)."""
    root = blamed.finding if blamed is not None else root_cause(findings)
    cause = f": {root.line.strip()[:200]}" if root else ""
    head = f"{service.config.id}: boot failed: {reason}{cause}"
    ordered = ([root] if root else []) + [f for f in findings if f is not root]
    everything = "\n".join(str(f) for f in ordered)
    evidence = f"\nmatching log lines:\n{everything}" if everything else ""
    details = f"{head}{evidence}\n{service.log_tail()}"
    saved: Path | None = None
    if service.log_paths:
        saved = service.log_paths[0].parent / EVIDENCE_FILE
        try:
            saved.write_text(details + "\n", encoding="utf-8")
        except OSError:
            saved = None
    lines = [head]
    if ordered:
        lines.append(f"fatal log lines: {len(ordered)} (root cause first):")
        lines += [f"  {_cut(f'{Path(f.source).name}:{f.line_no}: [{f.kind}] {f.line}')}"
                  for f in ordered[:_SHOWN_FINDINGS]]
        if len(ordered) > _SHOWN_FINDINGS:
            lines.append(f"  … {len(ordered) - _SHOWN_FINDINGS} more")
    where = blamed.node if blamed is not None else node_of(service, root) if root else None
    if where is not None and not 0 <= where < len(service.log_paths):
        where = None
    path = service.log_paths[where if where is not None else 0] if service.log_paths else None
    if path is not None:
        tail_lines = _section(service.log_tail(_TAIL_LINES), path.name)
        lines.append(f"--- {path.name} (last {len(tail_lines)} lines) ---")
        lines += [_cut(x) for x in tail_lines]
    if saved is not None:
        lines.append(f"every node's log tail and every fatal line: {saved}")
    return BootFailed("\n".join(lines[:SUMMARY_LINES]), reason=f"{reason}{cause}",
                      details=details, evidence_path=saved, cause=root.kind if root else "")


def _failed(service: Booting, followers: Sequence[LogFollower]) -> BootFailed:
    """A boot that showed a fatal line or a rank exit: the other nodes' last lines and exits
    are let in first (:func:`~pytest_ppsweep.service.logscan.settle`: a rank's own fatal line
    may land after its peers' lines about it), then the failure is named where it happened
    (:func:`~pytest_ppsweep.service.logscan.blame`)."""
    n = len(service.log_paths)
    seen = 0  # fatal lines read while settling: the ordinary lines of a rank still running
    # (request logs, a hang's heartbeat) do not hold the failure back

    def look() -> tuple[object, bool]:
        nonlocal seen
        for i, follower in enumerate(followers):
            first, lines = follower.new_lines()
            seen += len(service.scanner.scan(lines, service.log_paths[i].name, first))
        exited = service.exited()
        return (seen, tuple(exited)), len(exited) >= n

    settle(look)
    findings = service.findings()
    exited = service.exited()
    who = blame(findings, exited, lambda f: node_of(service, f))
    if who is None:  # nothing to name (a log that went away): as seen
        return boot_failure(service, "fatal line or rank exit", findings)
    ends = [f"node{r} exited with code {exit_text(rc)}"
            for r, rc in sorted(exited, key=lambda e: (e[0] != who.node, e[0]))]
    if who.code is not None:
        reason = ", ".join(ends)
    else:
        # a layout of several groups: the line names its group and node (Finding.where)
        node = who.finding.where if who.finding and who.finding.where else f"node{who.node}"
        reason = f"fatal line in {node}'s log" + (f" ({', '.join(ends)})" if ends else "")
    return boot_failure(service, reason, findings, who)


def wait_until_ready(
    service: Booting,
    timeout_s: float,
    poll_s: float = 0.2,
    progress_every_s: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    on_status: Callable[[BootStatus], None] | None = None,
) -> float:
    """Return the seconds it took until every rank was healthy; raise :class:`BootFailed`.

    With ``on_status``, it is called at every poll with the boot's :class:`BootStatus`
    (instead of a progress line every ``progress_every_s``).
    """
    start = clock()
    followers = [LogFollower(p) for p in service.log_paths]
    last_progress = start
    n = len(service.specs)
    # The furthest milestone any rank reached (the first rank to reach it): it only moves on,
    # so a status line and progress.log follow the boot, not the ranks' interleaving.
    reached, newest = -1, ""
    engine = engine_of(service.config.engine)
    if on_status is not None:
        on_status(BootStatus(service.config.id, 0.0, timeout_s, 0, n))
    while True:
        for i, follower in enumerate(followers):
            first, lines = follower.new_lines()
            if service.scanner.scan(lines, service.log_paths[i].name, first):
                # The root cause may be on another node, its line not written yet: _failed
                # waits a moment for every node's last lines and exits, then names the node.
                raise _failed(service, followers)
            for line in lines:
                mark = milestone(line, engine)
                if mark is not None and engine.milestones.index(mark) > reached:
                    reached, newest = engine.milestones.index(mark), f"node{i}: {mark}"
        if service.exited():
            raise _failed(service, followers)
        answers = [health_and_token(service.url(r), timeout=HEALTH_TIMEOUT_S) for r in range(n)]
        codes = [code for code, _token in answers]
        # Before any answer is believed: a rank that exited meanwhile fails the boot, and an
        # answer from a process that is not the launched rank is a stale server.
        if service.exited():
            raise _failed(service, followers)
        for r, (code, token) in enumerate(answers):
            who = service.impostor(r, token) if code is not None else None
            if who:
                raise boot_failure(
                    service,
                    f"node{r}'s port answers, but not from the rank this boot launched: {who} "
                    "(a server left from an earlier run? stop it, or rerun with --ppsweep-reap)",
                )
        elapsed = clock() - start
        if on_status is not None:
            ready = sum(c == 200 for c in codes)
            on_status(BootStatus(service.config.id, elapsed, timeout_s, ready, n, newest))
        if codes[0] == 200 and all(c == 200 for c in codes[1:]):
            service.progress(f"{service.config.id}: healthy after {elapsed:.1f} s real")
            return elapsed
        if elapsed > timeout_s:
            raise boot_failure(
                service,
                f"not healthy within {timeout_s:.0f} s (rank 0 /health: {codes[0] or 'refused'}, "
                f"other ranks ready: {sum(c == 200 for c in codes[1:])}/{n - 1})",
            )
        if on_status is None and clock() - last_progress >= progress_every_s:
            last_progress = clock()
            service.progress(
                f"{service.config.id}: booting {elapsed:.0f} s / {timeout_s:.0f} s — rank 0 "
                f"/health {codes[0] or 'refused'}, ranks ≥ 1 ready "
                f"{sum(c == 200 for c in codes[1:])}/{n - 1}"
            )
        time.sleep(poll_s)
