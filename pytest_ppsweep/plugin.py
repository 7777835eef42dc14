"""pytest-ppsweep: parallel layouts of a multi-node SGLang service as pytest test cases.

Pure glue: options, parametrisation, hooks. The steps live in plain modules (see
docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep import backends, continuity, launch, options, summary
from pytest_ppsweep.progress import Progress
from pytest_ppsweep.state import RUN_KEY

if TYPE_CHECKING:
    from pytest_ppsweep.matrix import Cluster, Sweep
    from pytest_ppsweep.runstore import RunStore
    from pytest_ppsweep.sweeprun import SweepRun

_IDS_KEY = pytest.StashKey[list[str]]()
_PLAN_KEY = pytest.StashKey["continuity.Plan"]()
_SIGTERM_KEY = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    options.addoption(parser)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` starts one worker per cluster of the pool."""
    matrix = options.find_matrix(config)
    if matrix is None:
        return None
    return len(options.load_sweep(config, matrix).pool(options.get(config, "ppsweep_cluster")))


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM into pytest's Ctrl-C path so fixtures tear every rank down.
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ppsweep: a test of the parallel-layout sweep")
    config.addinivalue_line(
        "markers", "ppsweep_always: runs even for a layout that is reused or already done"
    )
    config.addinivalue_line(
        "markers", "ppsweep_gate: compares with a reference run; collected only with "
        "--ppsweep-compare"
    )
    matrix = options.find_matrix(config)
    if matrix is None:
        return
    sweep = options.load_sweep(config, matrix)
    pool = sweep.pool(options.get(config, "ppsweep_cluster"))
    for cluster in pool:
        try:
            backends.launcher_for(cluster)
        except NotImplementedError as exc:
            raise pytest.UsageError(f"{matrix}: {exc}") from None
    ids = options.selected_ids(config, sweep)
    # Read once, before anything boots: a bad reference or threshold fails now.
    compare_ref = options.reference(config, "ppsweep_compare")
    thresholds = options.thresholds(config, sweep)
    if _is_worker(config):
        leased = config.workerinput["ppsweep_cluster"]  # type: ignore[attr-defined]
        # Workers re-parse the command line, where --dist may be absent: group the layouts
        # (xdist suffixes node ids with @<xdist_group>) as the controller's scheduler expects.
        config.option.loadgroup = True
        pool = tuple(c for c in pool if c.name == leased)
        store = options.open_store(config, sweep, config.workerinput["ppsweep_run_id"])  # type: ignore[attr-defined]
        plan = continuity.Plan.from_builtin(config.workerinput["ppsweep_plan"])  # type: ignore[attr-defined]
    else:
        options.check_workers(config, pool)
        reuse_ref = options.reference(config, "ppsweep_reuse")
        store = options.open_store(config, sweep, None)
        plan = _plan(config, sweep, pool, store, ids, reuse_ref)
        store.copy_matrix(matrix)
        options.write_run_json(store, sweep, pool, ids)
        if not config.getoption("htmlpath", None):
            config.option.htmlpath = str(store.dir / "report.html")
            config.option.self_contained_html = True
    progress = Progress(config, store.dir / "progress.log")
    from pytest_ppsweep.sweeprun import SweepRun  # measuring stack: only when a sweep runs

    run = SweepRun(sweep, pool, store, progress)
    run.done = plan.done
    run.compare_ref = compare_ref
    run.thresholds = thresholds
    config.stash[RUN_KEY] = run
    config.stash[_PLAN_KEY] = plan
    if not _is_worker(config):
        for note in plan.notes:
            progress(note)
    config.stash[_IDS_KEY] = ids
    if threading.current_thread() is threading.main_thread():
        config.stash[_SIGTERM_KEY] = signal.signal(signal.SIGTERM, _on_sigterm)


def _plan(
    config: pytest.Config,
    sweep: Sweep,
    pool: tuple[Cluster, ...],
    store: RunStore,
    ids: list[str],
    reuse_ref: Path | None,
) -> continuity.Plan:
    try:
        plan = continuity.Plan()
        if options.get(config, "ppsweep_resume"):
            plan = continuity.resume(sweep, pool, store, ids)
        if reuse_ref is not None:
            plan = continuity.reuse(sweep, pool, store, ids, reuse_ref, plan)
    except continuity.ContinuityError as exc:
        raise pytest.UsageError(str(exc)) from None
    return plan


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Gate tests are deselected when there is no reference to compare with; layouts reused
    or finished in a resumed run are skipped, with the reason."""
    run = config.stash.get(RUN_KEY, None)
    if run is not None and run.compare_ref is None:
        gates = [i for i in items if i.get_closest_marker("ppsweep_gate")]
        if gates:
            config.hook.pytest_deselected(items=gates)
            items[:] = [i for i in items if not i.get_closest_marker("ppsweep_gate")]
    plan = config.stash.get(_PLAN_KEY, None)
    if plan is None or not (plan.skip_configs or plan.skip_points):
        return
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        cid = params.get("ppsweep_config")
        if cid is None or item.get_closest_marker("ppsweep_always"):
            continue
        why = plan.skip_configs.get(cid)
        if why is None and "concurrency" in params:
            why = plan.skip_points.get(f"{cid}-c{params['concurrency']}")
        if why:
            item.add_marker(pytest.mark.skip(reason=f"{cid}: {why}"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """One worker per cluster: layouts go only to workers whose cluster fits them, planned
    from the durations an earlier run of the sweep measured."""
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        return None
    from pytest_ppsweep.balance import expected_durations
    from pytest_ppsweep.lease import PoolScheduling

    ids = config.stash[_IDS_KEY]
    skipped = config.stash[_PLAN_KEY].skip_configs  # reused or finished before a resume
    expected = expected_durations(
        run.store.dir.parent, run.sweep.name, ids, run.store.run_id, skipped=skipped
    )
    run.progress(f"pool plan: {expected.describe()}")
    return PoolScheduling(config, log, run.sweep, _pool(config, run), expected, run.progress)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: lease a cluster to the worker; it writes into this run folder."""
    run = node.config.stash.get(RUN_KEY, None)
    if run is not None:
        cluster = _pool(node.config, run).lease(node.gateway.id)
        node.workerinput["ppsweep_cluster"] = cluster.name
        node.workerinput["ppsweep_run_id"] = run.store.run_id
        node.workerinput["ppsweep_plan"] = node.config.stash[_PLAN_KEY].as_builtin()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: the cluster returns to the pool; a crashed worker's ranks are reaped."""
    run = node.config.stash.get(RUN_KEY, None)
    if run is None:
        return
    cluster = _pool(node.config, run).release(node.gateway.id)
    if error and cluster is not None:
        from pytest_ppsweep.lease import reap_local

        pids = reap_local(run.store.run_id, cluster.name)
        run.progress(
            f"worker {node.gateway.id} crashed; cluster {cluster.name} back in the pool; "
            f"stopped {len(pids)} leftover rank process(es)"
        )


_POOL_KEY = pytest.StashKey[Any]()


def _pool(config: pytest.Config, run: SweepRun) -> Any:
    if _POOL_KEY not in config.stash:
        from pytest_ppsweep.lease import Pool

        config.stash[_POOL_KEY] = Pool({c.name: c for c in run.clusters})
    return config.stash[_POOL_KEY]


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before the first boot (controller only): leftovers of earlier runs on ssh clusters are
    reported, or removed with --ppsweep-reap; then every node of every cluster is checked at
    once. Any problem is a usage error listing all of them, and nothing is booted."""
    config = session.config
    run = config.stash.get(RUN_KEY, None)
    if run is None or _is_worker(config) or config.option.collectonly:
        return
    from pytest_ppsweep import preflight, reap

    for cluster in run.clusters:
        if cluster.kind == "ssh":
            # a node that cannot be asked is left to the preflight, which reports it
            leftovers = reap.find(cluster, errors=[])
            if leftovers and config.getoption("ppsweep_reap"):
                failed = reap.remove(cluster, leftovers)
                if failed:
                    raise pytest.UsageError(
                        f"--ppsweep-reap: cluster {cluster.name}: could not remove:\n"
                        + "\n".join(f"  - {f}" for f in failed)
                    )
                run.progress(
                    f"cluster {cluster.name}: removed {len(leftovers)} leftover rank(s) of "
                    "earlier runs"
                )
            elif leftovers:
                run.progress(
                    f"WARNING: cluster {cluster.name}: {len(leftovers)} rank(s) of earlier runs "
                    f"are still on the nodes (remove them with --ppsweep-reap):\n"
                    + reap.describe(leftovers)
                )
        problems = preflight.check(run.sweep, cluster)
        if problems:
            raise pytest.UsageError(preflight.message(cluster, problems))
        run.store.write_json(
            f"metadata/nodes-{cluster.name}.json", preflight.metadata(run.sweep, cluster)
        )


def _reap_own(run: SweepRun) -> None:
    """Whatever this run still has on the nodes of an ssh cluster (a rank whose start was
    interrupted, a worker that crashed) is removed by its run label."""
    from pytest_ppsweep import reap

    for cluster in run.clusters:
        if cluster.kind != "ssh":
            continue
        errors: list[str] = []
        left = reap.find(cluster, run_id=run.store.run_id, errors=errors)
        failed = reap.remove(cluster, left) if left else []
        for problem in errors + failed:
            sys.stderr.write(f"ppsweep: cleanup of cluster {cluster.name}: {problem}\n")


def pytest_unconfigure(config: pytest.Config) -> None:
    launch.stop_all()
    run = config.stash.get(RUN_KEY, None)
    if run is not None:
        _reap_own(run)
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
        run = item.config.stash.get(RUN_KEY, None)
        if run is not None and "ppsweep_service" in getattr(item, "fixturenames", ()):
            run.worked(params["ppsweep_config"], call.duration)  # cluster time, for later plans
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


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    run = config.stash.get(RUN_KEY, None)
    if run is None or _is_worker(config):
        return
    pool = config.stash.get(_POOL_KEY, None)
    for config_id, why in pool.not_run.items() if pool else ():
        terminalreporter.write_line(f"NOT RUN {config_id}: {why}", red=True)
    result = summarize(config, run)
    terminalreporter.write_sep("=", f"ppsweep summary: {run.store.run_id}")
    for line in result.terminal:
        terminalreporter.write_line(line)
    if result.gate:
        terminalreporter.write_sep("=", f"ppsweep gate vs {run.compare_ref}")
        for line in result.gate:
            terminalreporter.write_line(line, red=line.startswith("REGRESSION"))
    terminalreporter.write_line(f"run folder: {run.store.dir}")
    html = config.getoption("htmlpath", None)
    if html:
        terminalreporter.write_line(f"report: {Path(html).resolve()}")
    name = options.get(config, "ppsweep_save_baseline")
    if name:
        for line in summary.save_baseline(
            run.store, name, options.reports_root(config), exitstatus
        ):
            terminalreporter.write_line(line)


_SUMMARY_KEY = pytest.StashKey[summary.Rendered]()


def summarize(config: pytest.Config, run: SweepRun) -> summary.Rendered:
    """Aggregate the run folder once, after the last teardown (html and terminal share it)."""
    if _SUMMARY_KEY not in config.stash:
        pool = config.stash.get(_POOL_KEY, None)
        not_run = dict(pool.not_run) if pool else {}
        config.stash[_SUMMARY_KEY] = summary.finish(
            run.store, config.stash[_IDS_KEY], not_run, run.compare_ref, run.thresholds
        )
    return config.stash[_SUMMARY_KEY]
