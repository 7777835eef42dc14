"""Fixtures of the sweep: one booted service per configuration, shared by its tests.

``ppsweep_config`` is parametrised (session scope) by the plugin with one value per point, so
``ppsweep_service`` boots each server configuration once (the points of one layout and axis
values that differ only in their workload share the boot, run/boots.py), their tests run, and
it is torn down before the next one boots. ``concurrency`` is a function-level parameter
(``c8``, ``c16``). With ``[sweep] boots`` > 1, ``ppsweep_boot_no`` (session scope, ``boot2``, …)
makes each layout's later boots: a new value of it is a new boot of the same layout.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

import pytest

from pytest_ppsweep.cluster.base import ClusterStop
from pytest_ppsweep.pointchecks import ExpectedFailure
from pytest_ppsweep.service.liveness import LayoutDead
from pytest_ppsweep.service.readiness import BootFailed
from pytest_ppsweep.session.owner import SweepSession

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Config
    from pytest_ppsweep.run.booted import Booted
    from pytest_ppsweep.run.sweeprun import SweepRun


# A test failed by its layout's boot or death: the terminal's short summary line names the failure
# in one line (pytest writes a failure's whole message there when it runs on CI, which would
# print the log tail a second time: the tail is shown once, in the test's own section).
ONE_LINE_SUMMARY = pytest.StashKey[bool]()


def one_line_summary(item: pytest.Item, report: pytest.TestReport) -> None:
    """The short summary of a test failed by its layout (:data:`ONE_LINE_SUMMARY`): the first
    line of its message only (pytest_runtest_makereport, before the report leaves a worker)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.failed and item.stash.get(ONE_LINE_SUMMARY, False) and crash is not None:
        crash.message = crash.message.split("\n", 1)[0]


def _fail_layout(request: pytest.FixtureRequest, message: str) -> NoReturn:
    request.node.stash[ONE_LINE_SUMMARY] = True
    pytest.fail(message, pytrace=False)


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
    session.measuring()  # an xdist worker takes its controller's slurm allocation now
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


@pytest.fixture(scope="session")
def ppsweep_boot_no(request: pytest.FixtureRequest) -> int:
    """Which of the layout's boots in this run the test runs on (parametrised by the plugin
    with ``[sweep] boots`` > 1, ids ``boot1``, ``boot2``, …; else 1)."""
    return int(getattr(request, "param", 1))


@dataclass
class _Boot:
    """One layout's boot, shared by its tests: the booted service, or why it failed and the
    test that showed the failure in full."""

    booted: Booted | None
    failure: BootFailed | None = None
    shown_by: str = ""


@pytest.fixture(scope="session")
def _ppsweep_boot(request: pytest.FixtureRequest, ppsweep: SweepRun, ppsweep_config: Config,
                  ppsweep_boot_no: int) -> Iterator[_Boot]:
    """The point's boot, on every node, for all its tests: one per server configuration
    (the points that differ only in their workload share it, run/boots.py); stopped after the
    last test of the last of them. A cluster that cannot take the layout (ClusterStop: a
    Slurm allocation's time or nodes ran out, and the sweep file says stop or no new one
    fits) stops the session, with the command that resumes it."""
    try:
        booted = ppsweep.acquire(ppsweep_config, ppsweep_boot_no)
    except ClusterStop as exc:
        session = SweepSession.of(request.config)
        resume = f"\nresume: {session.resume_command()}" if session is not None else ""
        pytest.exit(f"{ppsweep_config.id}: {exc}{resume}", returncode=pytest.ExitCode.INTERRUPTED)
    except BootFailed as exc:
        try:
            yield _Boot(None, exc)
        finally:
            ppsweep.release(ppsweep_config, ppsweep_boot_no)
        return
    try:
        yield _Boot(booted)
    finally:
        ppsweep.release(ppsweep_config, ppsweep_boot_no)


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
    ppsweep: SweepRun = request.getfixturevalue("ppsweep")
    config: Config = request.getfixturevalue("ppsweep_config")
    expected = ppsweep.sweep.expectation(config)
    if expected is not None and expected.covers(failed.cause):  # [[expect]]: pytest's XFAIL
        raise ExpectedFailure(f"{config.id}: {expected.text}: {failed.reason}")
    if not _ppsweep_boot.shown_by:
        _ppsweep_boot.shown_by = request.node.nodeid
        message = str(failed)
    else:
        message = (f"{str(failed).splitlines()[0][:300]}\n(its fatal lines and log tail are "
                   f"shown with {_ppsweep_boot.shown_by})")
    if expected is not None:  # a failure of another kind than the one expected still fails
        message = (f"{config.id}: {expected.text}, but it failed otherwise (root cause: "
                   f"{failed.cause or 'no fatal line'}):\n{message}")
    _fail_layout(request, message)


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
    _fail_layout(request, failure)


@pytest.fixture
def concurrency(request: pytest.FixtureRequest) -> int:
    """Requests in flight for this benchmark test (parametrised by the plugin: c8, c16, …)."""
    value = getattr(request, "param", None)
    if value is None:
        raise pytest.UsageError("concurrency is parametrised by the ppsweep plugin only")
    return int(value)
