"""Fixtures of the real-SGLang runs: provisioning, sweep folders, and no process left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.paths import ACCEPTANCE
from support.real import (
    READINESS_WORKAROUND,
    Provisioned,
    ProvisionImpossible,
    marked_processes,
    provision,
    sweep_toml,
)

MIN_MEM_AVAILABLE_GIB = 8.0  # rank 0 ~2 GB + 3 × 1.4 GB, plus the pytest processes


def _mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0


@pytest.fixture(scope="session")
def sglang_cpu() -> Provisioned:
    """SGLang 0.5.23 for CPU and the tiny models (scripts/provision_sglang_cpu.sh; seconds when
    already provisioned). Skips only when provisioning cannot work on this machine."""
    if not Path("/proc").is_dir() or not hasattr(os, "sched_getaffinity"):
        pytest.skip("real SGLang on CPU needs Linux (/proc, loopback 127.0.6.x)")
    mem = _mem_available_gib()
    if mem < MIN_MEM_AVAILABLE_GIB:
        pytest.skip(
            f"real SGLang on 4 loopback nodes needs {MIN_MEM_AVAILABLE_GIB} GiB of free "
            f"RAM, this machine has {mem:.1f} GiB available"
        )
    try:
        return provision()
    except ProvisionImpossible as exc:
        pytest.skip(f"cannot provision real SGLang here: {exc}")


@pytest.fixture
def mark() -> str:
    """A unique value put into every rank's environment, to find our processes in /proc."""
    return uuid.uuid4().hex[:12]


@pytest.fixture
def real_sweep_dir(
    pytester: pytest.Pytester, sglang_cpu: Provisioned, mark: str
) -> Callable[..., Path]:
    """Write a sweep folder: test_matrix/cpu.toml adapted to this machine + the acceptance
    tests + the readiness workaround (see support.real.READINESS_WORKAROUND)."""
    counter = iter(range(100))

    def make(**overrides: object) -> Path:
        n = next(counter)
        offset = (os.getpid() % 90) * 10 + n  # ports 34000-34999, dist ports 35000-35999
        folder = pytester.path / f"matrix{n}"
        folder.mkdir()
        text = sweep_toml(
            sglang_cpu, port=34000 + offset, dist_port=35000 + offset, mark=mark, **overrides
        )
        (folder / "ppsweep.toml").write_text(text)
        (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
        (folder / "conftest.py").write_text(READINESS_WORKAROUND)
        return folder

    return make


@pytest.fixture(autouse=True)
def no_leftover_sglang(mark: str) -> Iterator[None]:
    """Every real run must leave no SGLang process behind (checked in /proc by our mark)."""
    yield
    deadline = time.monotonic() + 2  # the plugin waits for every group; 2 s for stragglers
    while (left := marked_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid, _cmd in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "SGLang processes left running:\n" + "\n".join(
        f"{pid} {cmd}" for pid, cmd in left
    )
