"""Fixtures of the end-to-end runs (support/sweepdirs.py; the emulator's: simfixtures.py) and the
real Slurm (tests/support/slurm.py), checked clean after every Slurm test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.simfixtures import cluster, state_dir
from support.slurm import TestSlurm, clean, leftovers, test_slurm
from support.sweepdirs import no_leftover_ranks, ports, sweep_dir

__all__ = ["cluster", "no_leftover_ranks", "ports", "state_dir", "sweep_dir", "test_slurm"]


@pytest.fixture
def slurm_clean(test_slurm: TestSlurm) -> Iterator[TestSlurm]:
    """The Slurm, and after the test: 0 allocations, 0 steps, 0 labelled tasks left."""
    assert not leftovers(test_slurm), "the Slurm was not clean before the test"
    yield test_slurm
    left = leftovers(test_slurm)
    if left:
        clean(test_slurm)
    assert not left, "left on the Slurm:\n" + "\n".join(left)
