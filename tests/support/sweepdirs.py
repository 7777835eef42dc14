"""Fixtures of the end-to-end runs of the plugin on the emulator (pytester, real processes): a
sweep folder per call, the ports it uses, and no emulator rank of them left when a test ends.
Folders that use them import them into their conftest."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.halves import half
from support.matrices import CONFIGS, small_matrix
from support.paths import sweep_folder
from support.processes import kill_sim_ranks_on


@pytest.fixture
def sweep_dir(
    pytester: pytest.Pytester, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[..., Path]:
    """Write a sweep folder (matrix + the project's acceptance tests) into the pytester dir."""
    counter = iter(range(100))
    ports = request.node.stash.setdefault(PORTS_KEY, [])

    def make(
        configs: str = CONFIGS, scale: int = 2000, edits: dict[str, str] | None = None,
        **extra: str,
    ) -> Path:
        n = next(counter)
        port = _port_base() + (os.getpid() % 200) * 10 + n
        ports.append(port)
        text = small_matrix(
            configs,
            net=extra.get("net", "127.0.6"),
            port=port,
            dist=port + 5000,
            scale=scale,
            state=tmp_path / f"sim-state-{n}",
        )
        for old, new in (edits or {}).items():
            assert old in text, f"{old!r} not in the small matrix"
            text = text.replace(old, new)
        return sweep_folder(pytester.path / f"matrix{n}", text)

    return make


PORTS_KEY = pytest.StashKey[list[int]]()


def _port_base() -> int:
    """31000, or 25000 in the machine half (support.halves): that half sees every process of
    the machine, the private half's too, and finds leftover ranks by their ``--port``; no test of
    the private half uses 25000-26999."""
    return 25000 if half() == "machine" else 31000


@pytest.fixture
def ports(request: pytest.FixtureRequest) -> list[int]:
    """HTTP ports of this test's emulated clusters (append each one used): none of their ranks
    may be left running when the test ends (:func:`no_leftover_ranks`)."""
    return request.node.stash.setdefault(PORTS_KEY, [])


@pytest.fixture(autouse=True)
def no_leftover_ranks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every end-to-end test must leave no emulator rank of its own sweeps behind."""
    yield
    left = kill_sim_ranks_on(request.node.stash.get(PORTS_KEY, []))
    assert not left, f"emulator ranks left running: {sorted(left)}"
