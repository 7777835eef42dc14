"""Fatal patterns in service logs: CUDA OOM, Traceback, NCCL/Gloo/RDMA failures, watchdog…

The generic strings come from PyTorch's, NCCL's and CUDA's own messages; the engine adds its own
(engine/, its ``fatal_patterns``: for SGLang, the contract's §3.6). The scan
is used twice: while a service boots (fail fast at the first fatal line) and as a test after the
benchmark (every node's log must be free of them).
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import engine_of

# The generic fatal lines (PyTorch, NCCL, Gloo, RDMA, CUDA, Python), by kind, in the order a
# line is matched: the first kind whose pattern matches names it. The engine adds its own lines
# to these kinds (its ``fatal_patterns``, engine/).
GENERIC_PATTERNS: tuple[tuple[str, str], ...] = (
    # First: a line that reports another process's failure (a consequence): a peer's connection
    # gone (Gloo's "Connection closed by peer" inside a RuntimeError, a reset, an HTTP "other
    # side closed"), "… of rank N exited", NCCL's "remote process exiting". It names where to
    # look, not what went wrong there.
    (
        "consequence",
        r"[Cc]onnection (closed|reset) by peer|other side closed"
        r"|(of|node_)\s?rank \d+ exited|remote process exit",
    ),
    # A node's own subprocess killed by a signal (the OOM killer, a kill -9): the engine's line
    ("killed", ""),
    ("cuda-oom", r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory"),
    ("traceback", r"Traceback \(most recent call last\)"),
    (
        "nccl",
        r"NCCL error|nccl(Internal|System|Remote|UnhandledCuda|InvalidUsage)Error"
        r"|DistBackendError|NCCL WARN .*(fail|error|Error)"
        r"|Watchdog caught collective operation timeout",
    ),
    # torch's rendezvous store: a rank that never joined (rank 0 gives up after its timeout)
    ("rendezvous", r"DistStoreError|Timed out after \d+ seconds waiting for clients"),
    ("gloo", r"Gloo connectFullMesh failed|gloo/transport/\S+\].*(closed|error|timed out)"),
    # "ibv_" first, its word boundary looked behind: every alternative of a pattern starting
    # with a literal lets the regex engine skip to candidate characters (~5 times faster)
    ("rdma", r"ibv_(?<=\bibv_)\w+ failed|NET/IB\s*:.*(fail|error|Error)|RDMA.*(failure|error)"),
    ("watchdog", ""),
    ("engine", ""),
    # A launcher's echo of its own children's failure: the line that says what failed is beside
    # it (the engine's line)
    ("sigquit", ""),
    ("connection-refused", r"Connection refused|ConnectionRefusedError"),
    # Last: the generic error lines, so a specific kind above wins.
    ("exception", r"^\s*(RuntimeError|ValueError|AssertionError|KeyError)\b"),
)


def fatal_patterns(engine: Engine | None = None) -> tuple[tuple[str, str], ...]:
    """The generic patterns with ``engine``'s own lines added to their kinds (the default
    engine's when None), in the generic order; a kind with no pattern at all is left out."""
    own = (engine or engine_of()).fatal_patterns
    merged = [(kind, "|".join(p for p in (own.get(kind, ""), generic) if p))
              for kind, generic in GENERIC_PATTERNS]
    known = {kind for kind, _ in GENERIC_PATTERNS}
    merged += [(kind, p) for kind, p in own.items() if kind not in known]
    return tuple((kind, p) for kind, p in merged if p)


FATAL_PATTERNS: tuple[tuple[str, str], ...] = fatal_patterns()


@dataclass(frozen=True)
class Finding:
    """One fatal line: which pattern, which file, which line number (1-based); ``where``: the
    server group and node whose log it is, in a layout of several groups (``decode group
    pp1-tp16-ep16 node1 (host-3)``; "" for a single serve group, whose file names say it)."""

    kind: str
    source: str
    line_no: int
    line: str
    where: str = ""

    def __str__(self) -> str:
        at = f"{self.where}: " if self.where else ""
        return f"{at}{self.source}:{self.line_no}: [{self.kind}] {self.line}"


class LogScanner:
    """Matches lines against the fatal patterns (plus any the sweep file adds)."""

    def __init__(self, extra: Sequence[str] = (), engine: Engine | None = None,
                 patterns: Mapping[str, str] | None = None) -> None:
        """``extra``: the sweep's own patterns; ``engine``: whose fatal lines count (the
        default engine's when None); ``patterns``: kind → regex instead of a server's (a
        router's log has lines of its own)."""
        own = list(patterns.items()) if patterns is not None else list(fatal_patterns(engine))
        pats = own + [(f"custom-{i}", p) for i, p in enumerate(extra)]
        self._patterns = [(kind, re.compile(p)) for kind, p in pats]
        # path → (inode, size, mtime) of its last scan and what it found (scan_file)
        self._scanned: dict[Path, tuple[tuple[int, int, int], list[Finding]]] = {}

    def match(self, line: str) -> str | None:
        for kind, rx in self._patterns:
            if rx.search(line):
                return kind
        return None

    def scan(self, lines: Iterable[str], source: str, first_line_no: int = 1) -> list[Finding]:
        out = []
        for n, line in enumerate(lines, start=first_line_no):
            kind = self.match(line)
            if kind:
                out.append(Finding(kind, source, n, line.rstrip("\n")))
        return out

    def scan_file(self, path: Path) -> list[Finding]:
        """Every fatal line of the file. A file that has not changed since this scanner last
        read it (same inode, size and modification time) is not read again: the log scan
        after a layout's tests follows test_logs_clean's, with nothing logged in between."""
        stat = path.stat()
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        last = self._scanned.get(path)
        if last is not None and last[0] == key:
            return list(last[1])
        with path.open(encoding="utf-8", errors="replace") as fh:
            found = self.scan(fh, str(path))
        self._scanned[path] = (key, found)  # stat before the read: a line added meanwhile
        return list(found)  # changes the key, and the next scan reads the file again


class LogFollower:
    """Reads what a growing log file gained since the last call (for the boot watch)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._line_no = 0
        self._partial = ""

    def new_lines(self) -> tuple[int, list[str]]:
        """Complete lines added since the last call, with the number of the first one."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return self._line_no + 1, []
        self._offset += len(data)
        text = self._partial + data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        self._partial = lines.pop()
        first = self._line_no + 1
        self._line_no += len(lines)
        return first, lines


# Which finding explains a failure best: a rank that dies takes its peers' connections down
# with it, so "connection closed" or a bare Traceback is a consequence, an OOM is a cause. A line
# that reports another process's failure, and a launcher's echo of its children's, come last:
# the failing rank's own lines, or its process exit (:func:`blame`), outrank them.
_CAUSE_ORDER = ("cuda-oom", "killed", "watchdog", "nccl", "rdma", "rendezvous", "exception",
                "engine", "gloo", "traceback", "connection-refused", "sigquit", "consequence")
CONSEQUENCES = frozenset({"sigquit", "consequence"})


def _consequences(findings: Sequence[Finding]) -> set[int]:
    """Indexes of the findings that only tell of a failure elsewhere: the consequence kinds, and
    a Traceback header whose record ends in one (the next finding of its log is a consequence:
    ``Traceback … RuntimeError: [gloo/…/pair.cc:534] Connection closed by peer``)."""
    out = {i for i, f in enumerate(findings) if f.kind in CONSEQUENCES}
    nxt: dict[str, int] = {}  # the next finding of each log, walking backwards
    for i in sorted(range(len(findings)), key=lambda i: (findings[i].source,
                                                         -findings[i].line_no)):
        f = findings[i]
        after = nxt.get(f.source)
        if f.kind == "traceback" and after is not None and findings[after].kind == "consequence":
            out.add(i)
        nxt[f.source] = i
    return out


def _root(findings: Sequence[Finding], late: set[int]) -> Finding | None:
    """The first finding of the highest-ranked kind, those of ``late`` (consequences) last."""
    if not findings:
        return None
    rank = {k: i for i, k in enumerate(_CAUSE_ORDER)}
    best = min(range(len(findings)),
               key=lambda i: (i in late, rank.get(findings[i].kind, -1), i))
    return findings[best]


def root_cause(findings: Sequence[Finding]) -> Finding | None:
    """The most telling finding: the first of the highest-ranked kind, a consequence (a line
    about another process's failure, or the Traceback that ends in one) only when nothing
    else was found."""
    return _root(findings, _consequences(findings))


def node_of_log(log_paths: Sequence[Path], finding: Finding) -> int | None:
    """The node whose log holds ``finding`` (by its log file: a follower names the file, a
    scan its path), None when not one of ``log_paths``."""
    for i, path in enumerate(log_paths):
        if finding.source in (path.name, str(path)):
            return i
    return None


_SIGNALS = {int(s): s.name for s in signal.Signals}


def exit_text(code: int) -> str:
    """``-9 (SIGKILL)`` for a process ended by a signal, else the code."""
    name = _SIGNALS.get(-code) if code < 0 else None
    return f"{code} ({name})" if name else str(code)


@dataclass(frozen=True)
class Blame:
    """Where a failure happened: the node, the line of its own log that says what (None: its
    process ended without one), and its exit code (None: still running)."""

    node: int
    finding: Finding | None
    code: int | None


def blame(findings: Sequence[Finding], exited: Sequence[tuple[int, int]],
          node_of: Callable[[Finding], int | None]) -> Blame | None:
    """The node a failure is named on, from every node's fatal lines and process exits
    (``(node, code)``); the one home of that rule (boot failures and the liveness watch).

    1. The root cause (:func:`root_cause`) when it is a node's own line (not a consequence):
       a rank's own fatal line outranks a peer's line about it and every process exit.
    2. Else a node whose process ended (non-zero) with no fatal line of its own: it died
       without a word (a SIGKILL writes none) and the others' lines are about it. Killed by a
       signal first, then the highest node rank (a rank ≥ 1 that dies takes rank 0 down).
    3. Else the consequence line's node; else the exit: a signal first, the highest node.
    """
    codes = dict(exited)
    late = _consequences(findings)
    root = _root(findings, late)
    if root is not None and not any(findings[i] is root for i in late):
        node = node_of(root)
        node = 0 if node is None else node
        return Blame(node, root, codes.get(node))
    speaking = {node_of(f) for f in findings}
    silent = [(r, rc) for r, rc in exited if rc != 0 and r not in speaking]
    if silent:
        r, rc = min(silent, key=lambda e: (e[1] >= 0, -e[0]))
        return Blame(r, None, rc)
    if root is not None:
        node = node_of(root)
        node = 0 if node is None else node
        return Blame(node, root, codes.get(node))
    if exited:
        r, rc = min(exited, key=lambda e: (e[1] >= 0, e[1] == 0, -e[0]))
        return Blame(r, None, rc)
    return None


# Before a failure is named: the other nodes' last fatal lines and exits are let in (a rank's
# own fatal line may land after its peers' lines about it; a killed rank's exit after them).
SETTLE_S = 1.5
SETTLE_QUIET_S = 0.4
SETTLE_POLL_S = 0.05


def settle(look: Callable[[], tuple[object, bool]], *, limit_s: float = SETTLE_S,
           quiet_s: float = SETTLE_QUIET_S, poll_s: float = SETTLE_POLL_S,
           clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], object] = time.sleep) -> float:
    """Poll ``look`` (what was seen so far: the fatal lines read and the exits; and whether
    every rank has exited) until every rank exited and nothing changed since the poll before,
    or nothing changed for ``quiet_s``, or ``limit_s`` passed. Returns the seconds waited."""
    start = clock()
    state, _ = look()
    since = start
    while clock() - start < limit_s:
        sleep(poll_s)
        now_state, all_exited = look()
        now = clock()
        if now_state != state:
            state, since = now_state, now
            continue
        if all_exited or now - since >= quiet_s:
            break
    return clock() - start


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log, for failure messages."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            content = fh.readlines()
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "".join(content[-lines:])


_SIM_BANNER = re.compile(engine_of().emulator_banner)


def simulated_time_scale(log_path: Path, max_lines: int = 20) -> float | None:
    """The emulator's time scale from the banner it prints first (None: not the emulator, or
    no log yet)."""
    try:
        with log_path.open(encoding="utf-8", errors="replace") as fh:
            for _, line in zip(range(max_lines), fh, strict=False):
                if (m := _SIM_BANNER.search(line)) is not None:
                    scale = float(m.group(1))
                    return scale if scale > 0 else None
    except (OSError, ValueError):
        return None
    return None
