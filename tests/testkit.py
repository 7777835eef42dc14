"""Helpers shared by the test folders: run-folder reading, bounded waits, /proc lookups.

tests/ is on sys.path (its conftest.py is not in a package), so any test module or helper can
``from testkit import …``.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def rows(csv_path: Path) -> list[dict[str, str]]:
    """A CSV of the run folder as dicts ([] when it does not exist yet)."""
    if not csv_path.exists():
        return []
    with csv_path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def run_dir(reports: Path) -> Path:
    """The one run folder in ``reports``."""
    runs = [p for p in reports.iterdir() if p.is_dir()]
    assert len(runs) == 1, f"expected one run folder in {reports}, found {runs}"
    return runs[0]


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


# Two 32-GPU layouts (4 nodes x 8 GPUs): the small sweeps of the e2e tests.
CONFIGS = """
[[configs]]
pp = 4
tp = 8

[[configs]]
pp = 8
tp = 4
"""

# The same two layouts; PP8 fails at boot with the emulator's out-of-memory fault.
BOOT_FAULT_CONFIGS = CONFIGS + """env = { PPSWEEP_SIM_FAULTS = "oom_load" }
"""
