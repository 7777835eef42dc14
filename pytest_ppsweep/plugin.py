"""pytest-ppsweep: parallel layouts of a multi-node SGLang service as pytest test cases.

Wiring only: each hook hands over to the run's :class:`~pytest_ppsweep.session.owner.SweepSession`
(or to options/fixtures). Hooks of pytest-xdist and pytest-html live in classes registered only
when that plugin is active (pytest-cov's habit), so ``-p no:xdist`` and ``-p no:html`` work.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from pytest_ppsweep.fixtures import one_line_summary
from pytest_ppsweep.report import summary
from pytest_ppsweep.run.stops import raise_lost_stop
from pytest_ppsweep.service.liveness import LayoutDead
from pytest_ppsweep.session import collection, options
from pytest_ppsweep.session.owner import SweepSession


def pytest_addoption(parser: pytest.Parser) -> None:
    options.addoption(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # xdist asks for -n auto in its pytest_cmdline_main, before pytest_configure
    if early_config.pluginmanager.hasplugin("xdist"):
        early_config.pluginmanager.register(XdistHooks(), "ppsweep-xdist")


@pytest.hookimpl(tryfirst=True)  # before pytest-html reads --html (set to the run folder)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ppsweep: a test of the parallel-layout sweep")
    config.addinivalue_line(
        "markers", "ppsweep_always: runs even for a layout that is reused or already done"
    )
    config.addinivalue_line(
        "markers", "ppsweep_gate: compares with a reference run; collected only with "
        "--ppsweep-compare"
    )
    config.addinivalue_line(
        "markers", "ppsweep_profile: the profile window of a layout; collected only with "
        "--ppsweep-profile or for the layouts of a [profile] table"
    )
    config.addinivalue_line(
        "markers", "ppsweep_comm: the all-reduce benchmark per TP domain; collected only with "
        "--ppsweep-comm or a [comm] table"
    )
    config.addinivalue_line(
        "markers", "ppsweep_accuracy: the task score of a layout; collected only with an "
        "[accuracy] table"
    )
    config.addinivalue_line(
        "markers", "ppsweep_slo: the highest load within the workload's SLO; collected only for "
        "the layouts whose workload has an [workload.slo] table"
    )
    config.addinivalue_line(
        "markers", "ppsweep_reused(run_id): the point's rounds are kept from that run (resumed "
        "or reused): its skipped tests are shown as REUSED"
    )
    config.addinivalue_line(
        "markers", "ppsweep_verdict: judges a point from the run folder; on --ppsweep-resume a "
        "finished point's stored verdict counts without booting its layout again"
    )
    if config.pluginmanager.hasplugin("html"):
        config.pluginmanager.register(HtmlHooks(), "ppsweep-html")
        _group_results_by_layout(config)
    if SweepSession.start(config) is not None:
        config.pluginmanager.register(ProgressHooks(config), "ppsweep-progress")


def _group_results_by_layout(config: pytest.Config) -> None:
    """pytest-html's results table sorted by the Configuration column (a layout's tests stand
    together), unless the user set ``initial_sort`` (ini file or ``-o``). pytest-html reads the
    ini value in its own pytest_configure, after this one (tryfirst)."""
    chosen = getattr(config, "_inicfg", None)  # pytest 9: the ini file and -o overrides
    if chosen is None:  # pytest 8
        chosen = {**config.inicfg, **dict.fromkeys(
            o.split("=", 1)[0].strip() for o in getattr(config, "_override_ini", ()) or ())}
    cache = getattr(config, "_inicache", None)  # no public setter: a missing one only skips this
    if isinstance(cache, dict) and "initial_sort" not in chosen:
        cache["initial_sort"] = summary.INITIAL_SORT


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only tests that use a layout (directly or through ppsweep_service) are sweep tests;
    # a plain fixture or parameter named `concurrency` elsewhere is left alone.
    if "ppsweep_config" not in metafunc.fixturenames:
        return
    session = SweepSession.of(metafunc.config)
    if session is None:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: uses the sweep fixtures but no sweep file was found; "
            "pass --ppsweep-matrix PATH or run pytest on a folder that holds ppsweep.toml"
        )
    session.selection.parametrize(metafunc)


@pytest.hookimpl(tryfirst=True)  # a test this run does not have is never collected nor counted
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object
                              ) -> list[pytest.Item] | None:
    session = SweepSession.of(collector.config)
    return [] if session is not None and session.selection.not_collected(obj) else None


@pytest.hookimpl(tryfirst=True)  # every layout's tests, before -k/-m deselect any
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if (session := SweepSession.of(config)) is not None:
        session.selection.collected(items)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")  # after -k/-m
def pytest_collection_modifyitems_last(config: pytest.Config, items: list[pytest.Item]) -> None:
    if (session := SweepSession.of(config)) is not None:
        session.selection.keep_boots_together(items)


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    # below pytest's "collected N items / M deselected": what the gate's share of M is
    session = SweepSession.of(config)
    return session.selection.deselection_note() if session is not None else []


def pytest_collection_finish(session: pytest.Session) -> None:
    # after -k/-m deselection: which layouts are in this run (not called on an xdist controller)
    if (sweep := SweepSession.of(session.config)) is not None:
        sweep.selection.collection_finished(session.items)


# After collection: the preflight (the selection is known: an empty one connects to nothing;
# under xdist, after the first worker's collection), and with --ppsweep-adaptive the first
# layout the planner boots.
@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    if (sweep := SweepSession.of(session.config)) is not None:
        sweep.begin(session.items)


@pytest.hookimpl(wrapper=True)  # --ppsweep-adaptive: after a layout, refit and choose the next
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[
        None, object, object]:
    result = yield
    if (session := SweepSession.of(item.config)) is not None:
        session.adaptive.after(item, nextitem)
    return result


@pytest.hookimpl(tryfirst=True)  # --ppsweep-adaptive: a skipped layout is not booted
def pytest_runtest_setup(item: pytest.Item) -> None:
    if (session := SweepSession.of(item.config)) is not None:
        raise_lost_stop()  # a stop signal dropped inside a finalizer still stops the run
        session.adaptive.skip(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, LayoutDead):
        report.longrepr = str(call.excinfo.value)  # the cause and the logs, not a traceback
    one_line_summary(item, report)
    if (session := SweepSession.of(item.config)) is not None:
        session.record(item, call, report)
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config
                             ) -> tuple[str, str, str] | None:
    # a reused point's tests: "R" and "N reused", not "s" and "N skipped"
    return collection.reused_status(report)


# trylast: after the runner's last teardown. pluggy calls trylast impls in the order they were
# registered: this module comes before the report object pytest-html registers in its
# pytest_configure, so the summary is ready when pytest-html writes the report.
@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if (sweep := SweepSession.of(session.config)) is not None:
        sweep.finish(int(exitstatus))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if (session := SweepSession.of(config)) is not None:
        session.render.terminal(terminalreporter)


@pytest.hookimpl(trylast=True)  # after pytest-html and the others: it may end the process
def pytest_unconfigure(config: pytest.Config) -> None:
    if (session := SweepSession.of(config)) is not None:
        session.close()


class ProgressHooks:
    """The live status line is taken off the terminal before pytest writes a test's name,
    result or progress there (tryfirst; it is drawn again below at the next status update).
    These hooks get no config: the object holds the one of this process."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def _clear(self) -> None:
        if (session := SweepSession.of(self.config)) is not None:
            session.clear_progress()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self) -> None:
        self._clear()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self) -> None:
        self._clear()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logfinish(self) -> None:
        self._clear()


class XdistHooks:
    """pytest-xdist: one worker per cluster of the pool (registered only with xdist)."""

    def pytest_xdist_auto_num_workers(self, config: pytest.Config) -> int | None:
        """``-n auto`` starts one worker per cluster of the pool."""
        matrix = options.find_matrix(config)
        if matrix is None:
            return None
        return len(options.load_sweep(config, matrix).pool(options.get(config, "ppsweep_cluster")))

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        session = SweepSession.of(config)
        return session.xdist.scheduler(log) if session is not None else None

    def pytest_configure_node(self, node: Any) -> None:
        if (session := SweepSession.of(node.config)) is not None:
            session.xdist.configure_node(node)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Before any test is scheduled: the selection is known, the preflight runs (not for an
        # empty one: that run connects to nothing and leaves no run folder, session.quiet).
        if (session := SweepSession.of(node.config)) is not None:
            session.worker_collected(ids)

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if (session := SweepSession.of(node.config)) is not None:
            session.xdist.node_down(node, error)


class HtmlHooks:
    """pytest-html: the sweep summary above the table, and the layout's columns in it
    (registered only with pytest-html; they render what the session computed)."""

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        if (sweep := SweepSession.of(session.config)) is not None:
            sweep.render.html_summary(prefix)

    @pytest.hookimpl(trylast=True)  # pytest-html wrote its page at session finish
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if not hasattr(config, "workerinput"):  # the controller writes the page
            summary.lift_answers(config.getoption("htmlpath", None))

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells[2:2] = summary.TABLE_HEADER

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        cells[2:2] = summary.table_row(dict(report.user_properties))
