"""Fixtures of the sweep: one booted service per configuration, shared by its tests.

``ppsweep_config`` is parametrised (session scope) by the plugin with one value per point, so
``ppsweep_service`` boots each server configuration once (the points of one layout and axis
values that differ only in their workload share the boot, run/boots.py), their tests run, and
it is torn down before the next one boots. ``concurrency`` is a function-level parameter
(``c8``, ``c16``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
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
def ppsweep(request: pytest.FixtureRequest) -> Iterator[SweepRun]:
    """The run of the sweep: matrix, cluster, run folder, and the boot/measure steps. At the
    end of the session the boot still up (if any) is torn down."""
    session = SweepSession.of(request.config)
    if session is None:
        raise pytest.UsageError(
            "no sweep file: pass --ppsweep-matrix PATH or run pytest on a folder that holds "
            "ppsweep.toml (e.g. `pytest test_matrix`)"
        )
    try:
        yield session.run
    finally:
        session.run.boots.close()


@pytest.fixture(scope="session")
def ppsweep_config(request: pytest.FixtureRequest, ppsweep: SweepRun) -> Config:
    """The layout under test (parametrised by the plugin, one value per configuration)."""
    config_id = getattr(request, "param", None)
    if config_id is None:
        raise pytest.UsageError("ppsweep_config is parametrised by the ppsweep plugin only")
    return ppsweep.sweep.config(str(config_id))


@dataclass
class _Boot:
    """One layout's boot, shared by its tests: the booted service, or why it failed and the
    test that showed the failure in full."""

    booted: Booted | None
    failure: BootFailed | None = None
    shown_by: str = ""


@pytest.fixture(scope="session")
def _ppsweep_boot(ppsweep: SweepRun, ppsweep_config: Config) -> Iterator[_Boot]:
    """The point's boot, on every node, for all its tests: one per server configuration
    (the points that differ only in their workload share it, run/boots.py); stopped after the
    last test of the last of them."""
    try:
        booted = ppsweep.acquire(ppsweep_config)
    except BootFailed as exc:
        try:
            yield _Boot(None, exc)
        finally:
            ppsweep.release(ppsweep_config)
        return
    try:
        yield _Boot(booted)
    finally:
        ppsweep.release(ppsweep_config)


@pytest.fixture
def ppsweep_service(request: pytest.FixtureRequest, _ppsweep_boot: _Boot) -> Booted:
    """The layout booted on every node and healthy; stopped after its last test.

    A boot failure fails every test of this layout; the sweep goes on with the next layout.
    Its first test shows the reason, the fatal lines and the root-cause node's last lines (a
    short summary; every node's tail is in the run folder), the others name that test. So does
    a rank that dies later (``_ppsweep_alive``).
    """
    failed = _ppsweep_boot.failure
    if failed is None:
        assert _ppsweep_boot.booted is not None
        return _ppsweep_boot.booted
    if not _ppsweep_boot.shown_by:
        _ppsweep_boot.shown_by = request.node.nodeid
        message = str(failed)
    else:
        message = (f"{str(failed).splitlines()[0][:300]}\n(its fatal lines and log tail are "
                   f"shown with {_ppsweep_boot.shown_by})")
    pytest.fail(message, pytrace=False)


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
