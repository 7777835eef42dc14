"""Fatal patterns in service logs: CUDA OOM, Traceback, NCCL/Gloo/RDMA failures, watchdog…

The strings come from SGLang's and PyTorch's own messages (docs: SGLang contract §3.6). The scan
is used twice: while a service boots (fail fast at the first fatal line) and as a test after the
benchmark (every node's log must be free of them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

FATAL_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "cuda-oom",
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory"
        r"|Not enough memory\. Please try to increase|Prefill out of memory|Decode out of memory",
    ),
    ("traceback", r"Traceback \(most recent call last\)"),
    (
        "nccl",
        r"NCCL error|nccl(Internal|System|Remote|UnhandledCuda|InvalidUsage)Error"
        r"|DistBackendError|NCCL WARN .*(fail|error|Error)"
        r"|Watchdog caught collective operation timeout",
    ),
    # torch's rendezvous store: a rank that never joined (rank 0 gives up after --dist-timeout)
    ("rendezvous", r"DistStoreError|Timed out after \d+ seconds waiting for clients"),
    ("gloo", r"Gloo connectFullMesh failed|gloo/transport/\S+\].*(closed|error|timed out)"),
    # "ibv_" first, its word boundary looked behind: every alternative of a pattern starting
    # with a literal lets the regex engine skip to candidate characters (~5 times faster)
    ("rdma", r"ibv_(?<=\bibv_)\w+ failed|NET/IB\s*:.*(fail|error|Error)|RDMA.*(failure|error)"),
    ("watchdog", r"[Ww]atchdog timeout \(self\.watchdog_timeout"),
    (
        "engine",
        r"scheduler is dead|Initialization failed|Received sigquit|SIGQUIT received"
        r"|Capture cuda graph failed|custom_all_reduce\.cuh|Health check failed",
    ),
    ("connection-refused", r"Connection refused|ConnectionRefusedError"),
    # Last: the generic error lines, so a specific kind above wins.
    ("exception", r"hit an exception|^\s*(RuntimeError|ValueError|AssertionError|KeyError)\b"),
)


@dataclass(frozen=True)
class Finding:
    """One fatal line: which pattern, which file, which line number (1-based)."""

    kind: str
    source: str
    line_no: int
    line: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line_no}: [{self.kind}] {self.line}"


class LogScanner:
    """Matches lines against the fatal patterns (plus any the sweep file adds)."""

    def __init__(self, extra: Sequence[str] = ()) -> None:
        pats = list(FATAL_PATTERNS) + [(f"custom-{i}", p) for i, p in enumerate(extra)]
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
# with it, so "connection closed" or a bare Traceback is a consequence, an OOM is a cause.
_CAUSE_ORDER = ("cuda-oom", "watchdog", "nccl", "rdma", "rendezvous", "exception", "engine", "gloo",
                "traceback", "connection-refused")


def root_cause(findings: Sequence[Finding]) -> Finding | None:
    """The most telling finding (first of the highest-ranked kind)."""
    if not findings:
        return None
    rank = {k: i for i, k in enumerate(_CAUSE_ORDER)}
    return min(findings, key=lambda f: rank.get(f.kind, -1))


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log, for failure messages."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            content = fh.readlines()
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "".join(content[-lines:])


_SIM_BANNER = re.compile(r"SIMULATED SGLang \(pytest-ppsweep emulator, time scale ([0-9.eE+]+)x")


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
