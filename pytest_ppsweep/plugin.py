"""pytest-ppsweep: parallel layouts of a multi-node SGLang service as pytest test cases.

Pure glue: options, parametrisation, hooks. The steps live in plain modules (see
docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Generator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep import backends, launch, options, summary
from pytest_ppsweep.progress import Progress
from pytest_ppsweep.state import RUN_KEY

if TYPE_CHECKING:
    from pytest_ppsweep.sweeprun import SweepRun

_IDS_KEY = pytest.StashKey[list[str]]()
_SIGTERM_KEY = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    options.addoption(parser)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _refuse_parallel_single_cluster(config: pytest.Config, cluster: str) -> None:
    n = getattr(config.option, "numprocesses", None)
    if n in (None, 0) or n == 1 or _is_worker(config):
        return
    raise pytest.UsageError(
        f"-n {n}: cluster {cluster!r} can boot one configuration at a time, so more than one "
        "xdist worker would boot two layouts on the same nodes at once; run without -n "
        "(or with -n 1)"
    )


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` starts one worker per cluster of the run (one cluster: one worker)."""
    return 1 if config.stash.get(RUN_KEY, None) is not None else None


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM into pytest's Ctrl-C path so fixtures tear every rank down.
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ppsweep: a test of the parallel-layout sweep")
    matrix = options.find_matrix(config)
    if matrix is None:
        return
    sweep = options.load_sweep(config, matrix)
    cluster_name = options.get(config, "ppsweep_cluster") or sweep.default_cluster
    cluster = sweep.cluster(cluster_name)
    try:
        backends.launcher_for(cluster)
    except NotImplementedError as exc:
        raise pytest.UsageError(f"{matrix}: {exc}") from None
    ids = options.selected_ids(config, sweep)
    _refuse_parallel_single_cluster(config, cluster.name)
    worker_run_id = config.workerinput.get("ppsweep_run_id") if _is_worker(config) else None  # type: ignore[attr-defined]
    store = options.open_store(config, sweep, worker_run_id)
    if not _is_worker(config):
        store.copy_matrix(matrix)
        options.write_run_json(store, sweep, cluster.name, ids)
        if not config.getoption("htmlpath", None):
            config.option.htmlpath = str(store.dir / "report.html")
            config.option.self_contained_html = True
    progress = Progress(config, store.dir / "progress.log")
    from pytest_ppsweep.sweeprun import SweepRun  # measuring stack: only when a sweep runs

    config.stash[RUN_KEY] = SweepRun(sweep, cluster, store, progress)
    config.stash[_IDS_KEY] = ids
    if threading.current_thread() is threading.main_thread():
        config.stash[_SIGTERM_KEY] = signal.signal(signal.SIGTERM, _on_sigterm)


def pytest_configure_node(node: Any) -> None:
    """xdist controller: every worker writes into the controller's run folder."""
    run = node.config.stash.get(RUN_KEY, None)
    if run is not None:
        node.workerinput["ppsweep_run_id"] = run.store.run_id


def pytest_unconfigure(config: pytest.Config) -> None:
    launch.stop_all()
    previous = config.stash.get(_SIGTERM_KEY, None)
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only tests that use a layout (directly or through ppsweep_service) are sweep tests;
    # a plain fixture or parameter named `concurrency` elsewhere is left alone.
    if "ppsweep_config" not in metafunc.fixturenames:
        return
    run = metafunc.config.stash.get(RUN_KEY, None)
    if run is None:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: uses the sweep fixtures but no sweep file was found; "
            "pass --ppsweep-matrix PATH or run pytest on a folder that holds ppsweep.toml"
        )
    ids = metafunc.config.stash[_IDS_KEY]
    params = [pytest.param(i, id=i, marks=pytest.mark.xdist_group(i)) for i in ids]
    metafunc.parametrize("ppsweep_config", params, indirect=True, scope="session")
    if "concurrency" in metafunc.fixturenames:
        conc = run.sweep.workload.concurrency
        metafunc.parametrize("concurrency", conc, ids=[f"c{c}" for c in conc], indirect=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "ppsweep_config" in params and call.when == "call":
        report.user_properties.append(("ppsweep_config", params["ppsweep_config"]))
        if "concurrency" in params:
            report.user_properties.append(("concurrency", params["concurrency"]))
    return report


def pytest_html_results_summary(
    prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
) -> None:
    run = session.config.stash.get(RUN_KEY, None)
    if run is not None:
        prefix.extend(summarize(session.config, run).html)


def pytest_html_results_table_header(cells: list[str]) -> None:
    cells[2:2] = summary.TABLE_HEADER


def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
    cells[2:2] = summary.table_row(dict(report.user_properties))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    run = config.stash.get(RUN_KEY, None)
    if run is None or _is_worker(config):
        return
    result = summarize(config, run)
    terminalreporter.write_sep("=", f"ppsweep summary: {run.store.run_id}")
    for line in result.terminal:
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"run folder: {run.store.dir}")
    html = config.getoption("htmlpath", None)
    if html:
        terminalreporter.write_line(f"report: {Path(html).resolve()}")


_SUMMARY_KEY = pytest.StashKey[summary.Rendered]()


def summarize(config: pytest.Config, run: SweepRun) -> summary.Rendered:
    """Aggregate the run folder once, after the last teardown (html and terminal share it)."""
    if _SUMMARY_KEY not in config.stash:
        config.stash[_SUMMARY_KEY] = summary.render(run.store.dir)
    return config.stash[_SUMMARY_KEY]
