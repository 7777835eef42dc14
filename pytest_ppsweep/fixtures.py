"""Fixtures of the sweep: one booted service per configuration, shared by its tests.

``ppsweep_config`` is parametrised (session scope) by the plugin with one value per layout, so
``ppsweep_service`` boots each layout once, its tests run, and it is torn down before the next
layout boots. ``concurrency`` is a function-level parameter (``c8``, ``c16``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from pytest_ppsweep.service.liveness import LayoutDead
from pytest_ppsweep.service.readiness import BootFailed
from pytest_ppsweep.session.owner import SweepSession

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Config
    from pytest_ppsweep.run.booted import Booted
    from pytest_ppsweep.run.sweeprun import SweepRun


@pytest.fixture(scope="session")
def ppsweep(request: pytest.FixtureRequest) -> SweepRun:
    """The run of the sweep: matrix, cluster, run folder, and the boot/measure steps."""
    session = SweepSession.of(request.config)
    if session is None:
        raise pytest.UsageError(
            "no sweep file: pass --ppsweep-matrix PATH or run pytest on a folder that holds "
            "ppsweep.toml (e.g. `pytest test_matrix`)"
        )
    return session.run


@pytest.fixture(scope="session")
def ppsweep_config(request: pytest.FixtureRequest, ppsweep: SweepRun) -> Config:
    """The layout under test (parametrised by the plugin, one value per configuration)."""
    config_id = getattr(request, "param", None)
    if config_id is None:
        raise pytest.UsageError("ppsweep_config is parametrised by the ppsweep plugin only")
    return ppsweep.sweep.config(str(config_id))


@pytest.fixture(scope="session")
def ppsweep_service(ppsweep: SweepRun, ppsweep_config: Config) -> Iterator[Booted]:
    """The layout booted on every node and healthy; stopped after its last test.

    A boot failure fails every test of this layout with the reason and the log tails; the
    sweep goes on with the next layout. So does a rank that dies later (``_ppsweep_alive``).
    """
    try:
        booted = ppsweep.boot(ppsweep_config)
    except BootFailed as exc:
        failure = str(exc)
    else:
        failure = ""
    if failure:  # outside the except: the report shows the reason once, not chained to itself
        pytest.fail(failure, pytrace=False)
    try:
        yield booted
    finally:
        ppsweep.teardown(booted)


@pytest.fixture(autouse=True)
def _ppsweep_alive(request: pytest.FixtureRequest) -> None:
    """A test that uses a layout whose rank died after health (service.liveness) fails at
    once with the cause, instead of waiting on a server that cannot answer."""
    if "ppsweep_service" not in request.fixturenames:
        return
    booted: Booted = request.getfixturevalue("ppsweep_service")
    try:
        booted.check_alive()
    except LayoutDead as exc:
        failure = str(exc)
    else:
        return
    pytest.fail(failure, pytrace=False)


@pytest.fixture
def concurrency(request: pytest.FixtureRequest) -> int:
    """Requests in flight for this benchmark test (parametrised by the plugin: c8, c16, …)."""
    value = getattr(request, "param", None)
    if value is None:
        raise pytest.UsageError("concurrency is parametrised by the ppsweep plugin only")
    return int(value)
