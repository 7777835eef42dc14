"""Fixtures of the emulator tests (plain helpers in support/sim.py): a private GPU-state folder and
emulated services stopped at teardown. Folders that use them import them into their conftest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ppsweep.sim.rank.localcluster import LocalCluster
from support.sim import FAST_SCALE, ClusterFactory, next_ports


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """A private GPU-state directory."""
    d = tmp_path / "gpustate"
    d.mkdir()
    return d


@pytest.fixture
def cluster(tmp_path: Path, state_dir: Path) -> Iterator[ClusterFactory]:
    """Factory of emulated services; every process is stopped at teardown."""
    made: list[LocalCluster] = []

    def make(
        nodes: int,
        args: list[str],
        *,
        env: dict[str, str] | None = None,
        profile: str = "tiny",
        scale: str = FAST_SCALE,
        start: bool = True,
    ) -> LocalCluster:
        port, dist = next_ports()
        c = LocalCluster(
            hosts=[f"127.0.9.{i}" for i in range(1, nodes + 1)],
            port=port,
            dist_port=dist,
            extra_args=["--model-path", "/models/tiny", *args],
            env={
                "PPSWEEP_SIM_TIME_SCALE": scale,
                "PPSWEEP_SIM_PROFILE": profile,
                "PPSWEEP_SIM_STATE_DIR": str(state_dir),
                "PPSWEEP_SIM_FAULTS": "",
                **(env or {}),
            },
            log_dir=tmp_path / f"logs-{port}",
        )
        made.append(c)
        if start:
            c.start()
        return c

    yield make
    for c in made:
        c.stop()
