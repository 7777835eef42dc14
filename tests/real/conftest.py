"""Fixtures of the real-SGLang runs: provisioning, sweep folders, and no process left behind."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.paths import ACCEPTANCE
from support.real import (
    READINESS_WORKAROUND,
    Provisioned,
    assert_none_left,
    sweep_toml,
)


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
    assert_none_left(mark)
