"""Bounded waits and /proc lookups (no sleeps as synchronisation)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path


def wait_until(
    predicate: Callable[[], object], timeout_s: float = 15.0, what: str = "",
    interval_s: float = 0.05,
) -> None:
    """Bounded polling (no sleeps as synchronisation); AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what or predicate}")


def proc_entries() -> Iterator[Path]:
    """/proc/<pid> of every process (read them under ``except OSError``: they may vanish)."""
    return (e for e in Path("/proc").iterdir() if e.name.isdigit())


def cmdline(entry: Path) -> str:
    """A process's command line with spaces between the arguments."""
    return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def state(entry: Path) -> str:
    """A process's state letter from /proc/<pid>/stat (``Z`` a zombie: dead, its exit status not
    yet collected; it holds no memory, port or file)."""
    stat = (entry / "stat").read_text()
    return stat[stat.rindex(")") + 2:].split(" ", 1)[0]


def sim_processes(marker: str) -> list[int]:
    """PIDs of emulator ranks whose command line holds ``marker`` (e.g. a unique port)."""
    pids = []
    for entry in proc_entries():
        try:
            cmd = cmdline(entry)
        except OSError:
            continue
        if "pytest_ppsweep.sim" in cmd and marker in cmd:
            pids.append(int(entry.name))
    return pids


def kill_sim_ranks_on(ports: Iterable[int]) -> set[int]:
    """SIGKILL every emulator rank serving one of ``ports``; return their PIDs (a test's
    fixture asserts that set is empty: a rank left running is a teardown bug)."""
    left = {pid for port in ports for pid in sim_processes(f"--port {port}")}
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def child_env() -> dict[str, str]:
    """The environment of a pytest run started as a user would start it: only PATH, HOME,
    locale, PYTHONPATH and the venv (no PYTEST_*, no COLUMNS of this run)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV")
    return {k: os.environ[k] for k in keep if k in os.environ}
