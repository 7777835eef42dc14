"""The one object that owns a sweep run inside pytest (pytest's junitxml habit: one owner under
one typed stash key, created in ``pytest_configure``, closed in ``pytest_unconfigure``).

:class:`SweepSession` holds the loaded sweep, the selected layouts' ids, the run folder, the
continuity plan, the gate's reference and thresholds, the progress reporter, the registry of
live ranks and connections, the :class:`~pytest_ppsweep.run.sweeprun.SweepRun` (whose
:class:`~pytest_ppsweep.run.context.RunContext` holds the pool), the run's life
(:class:`~pytest_ppsweep.session.runstate.RunState`) and one object per concern, each given
what it needs (as pytest-xdist's DSession holds its scheduler): ``quiet`` (runs in which nothing
boots, noboot.py), ``nodes`` (the slurm allocation, setup.py), ``selection`` (collection and the
selection, collection.py), ``preflight`` (claims, leftovers, node checks, the final reap),
``signals``, ``xdist`` (the controller's leases and scheduler), ``adaptive`` (the planner's
order) and ``render`` (what the terminal and pytest-html show). plugin.py only forwards hooks.

Its life (session/runstate.py): :meth:`start` (configure: load, check the launchers, open the
run folder, plan reuse or resume), the selection (collection finished, controller: the layouts
and Cs left after -k/-m, and where the baseline's numbers come from when it is not among them),
:meth:`begin` (the preflight, then measuring), :meth:`record` (each test report: cluster time,
resume bookkeeping), :meth:`finish` (session finish, controller: not-run layouts, sorted
results, summary.csv, benchmark.json, gate.csv, the baseline), :meth:`close` (unconfigure: stop
every rank, reap, restore the handlers).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep import continuity
from pytest_ppsweep.cluster import backends
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.continuity import outcomes
from pytest_ppsweep.folder.runfolder import (
    PROFILE_DIR,
    PROGRESS_LOG,
    REPORT_HTML,
    OwnerKey,
    RunJson,
    RunStore,
    new_run_id,
)
from pytest_ppsweep.pool.lease import WORKER_CLUSTER, WORKER_PLAN, WORKER_RUN_ID
from pytest_ppsweep.profile import tracefiles
from pytest_ppsweep.report import summary
from pytest_ppsweep.results import runstatus
from pytest_ppsweep.run import close as close_folder
from pytest_ppsweep.session import options, setup
from pytest_ppsweep.session.adaptiveitems import Adaptive
from pytest_ppsweep.session.claims import Claims
from pytest_ppsweep.session.collection import (
    Selection,
    _counts_for_resume,
    _params,
    baseline_ref,
    mark_reused,
    resumed_verdict,
)
from pytest_ppsweep.session.noboot import (
    QuietRun,
    dry_run_requested,
    quiet_at_start,
    scratch_folder,
)
from pytest_ppsweep.session.preboot import Preflight
from pytest_ppsweep.session.progress import Progress
from pytest_ppsweep.session.render import Render
from pytest_ppsweep.session.runstate import RunState
from pytest_ppsweep.session.signals import Signals
from pytest_ppsweep.session.xdist import Xdist, check_workers, is_worker

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_ppsweep.matrix.model import Cluster, Sweep
    from pytest_ppsweep.run.sweeprun import SweepRun

__all__ = ["SESSION_KEY", "SweepSession"]


class SweepSession:
    """Owner of one sweep run in one pytest process (the controller, or an xdist worker)."""
    def __init__(
        self,
        config: pytest.Config,
        matrix: Path,
        sweep: Sweep,
        pool: tuple[Cluster, ...],
        ids: list[str],
        store: RunStore,
        plan: continuity.Plan,
        compare_ref: Path | None,
        thresholds: dict[str, Any],
        state: RunState,
        registry: Registry | None = None,
        *,
        scratch: Path | None = None,
        baseline_from: Path | None = None,
    ) -> None:
        """``pool``: the clusters this process may boot on (a worker: its leased one); ``state``:
        the run's life so far (configured, its nodes maybe known, maybe quiet); ``scratch``:
        where a run known to be quiet at configure keeps its files; ``baseline_from``:
        --ppsweep-baseline-from, checked at start."""
        self.config = config
        self.matrix = matrix
        self.sweep = sweep
        self.ids = ids
        self.store = store
        self.plan = plan
        self.compare_ref = compare_ref
        self.thresholds = thresholds
        self.worker = state.worker
        self.state = state
        self.progress = Progress(config, store.dir / PROGRESS_LOG)
        self.registry = registry if registry is not None else Registry()
        from pytest_ppsweep.run.sweeprun import SweepRun  # measuring stack: only when a sweep runs

        self.run: SweepRun = SweepRun(
            sweep,
            pool,
            store,
            self.progress,
            registry=self.registry,
            done=plan.done,
            compare_ref=compare_ref,
            thresholds=thresholds,
            live=self.progress,
        )
        ctx = self.run.context
        self.quiet = QuietRun(config, state, store, scratch)
        self.nodes = setup.Nodes(config, matrix, ctx, state)
        self.selection = Selection(config, self.run, ids, plan, compare_ref, baseline_from, state,
                                   self.quiet, self.nodes, self.progress)
        self.preflight = Preflight(config, ctx, state, self.quiet,
                                   Claims(config, matrix, ctx, self.progress), self.progress)
        self.signals = Signals()
        self.xdist = Xdist(config, ctx, ids, plan, self.progress)
        self.adaptive = Adaptive(config, self.run, ids, plan, self.worker)
        self.render = Render(config, state, self.quiet, self.xdist, store, compare_ref,
                             self.progress)
        self._started: set[str] = set()  # layouts whose outcomes this process records

    @staticmethod
    def of(config: pytest.Config) -> SweepSession | None:
        """The session of this pytest process, or None when no sweep runs."""
        found = config.stash.get(SESSION_KEY, None)
        if found is not None and not isinstance(found, SweepSession):
            raise TypeError(f"stash holds {type(found).__name__}, not a SweepSession")
        return found

    # -- set-up (pytest_configure) ------------------------------------------------------------

    @classmethod
    def start(cls, config: pytest.Config) -> SweepSession | None:
        """Load the sweep and open the run folder; None when no sweep file is in play."""
        matrix = options.find_matrix(config)
        if matrix is None:
            return None
        sweep = options.load_sweep(config, matrix)
        pool = sweep.pool(options.get(config, "ppsweep_cluster"))
        for cluster in pool:
            try:
                backends.launcher_for(cluster)
            except NotImplementedError as exc:
                raise pytest.UsageError(f"{matrix}: {exc}") from None
        ids = options.selected_ids(config, sweep)
        options.selected_concurrencies(config, sweep)  # a bad one fails before anything is made
        dry_run = dry_run_requested(config)
        if not is_worker(config):
            setup.resumed_folder(config)  # a resume of a missing run fails, the dry run's too
        scratch = scratch_folder(config, is_worker(config))
        # Read once, before anything boots: a bad reference or threshold fails now.
        compare_ref = options.reference(config, "ppsweep_compare")
        thresholds = options.thresholds(config, sweep)
        baseline_from: Path | None = None
        registry = Registry()
        # The run folder was made by this process (not a resumed or earlier one): a run that
        # records nothing removes it (session.quiet).
        made = False
        if is_worker(config):
            winput = config.workerinput  # type: ignore[attr-defined]
            # Workers re-parse the command line, where --dist may be absent: group the layouts
            # (xdist suffixes node ids with @<xdist_group>) as the controller's scheduler expects.
            config.option.loadgroup = True
            pool = tuple(c for c in pool if c.name == winput[WORKER_CLUSTER])
            store, _ = setup.open_store(config, sweep, winput[WORKER_RUN_ID])
            plan = continuity.Plan.from_builtin(winput[WORKER_PLAN])
            nodes_known = not any(backends.backend_of(c).nodes_from_allocation
                                  for c in pool)  # else at its first test
        else:
            check_workers(config, pool)
            reuse_ref = options.reference(config, "ppsweep_reuse")
            if scratch is not None:
                store = RunStore(scratch, new_run_id(sweep.name))
            else:
                store, made = setup.open_store(config, sweep, None)
            # A slurm allocation is asked for once the selection holds a point (setup.Nodes),
            # unless the set-up compares manifests that name the nodes; never in a quiet run.
            nodes_known = scratch is None and setup.nodes_needed_at_start(config)
            try:
                if nodes_known:
                    pool = setup.allocate(config, matrix, pool, store.run_id, registry)
                baseline_from = baseline_ref(config, sweep, pool)
                plan = setup.plan(config, sweep, pool, store, ids, reuse_ref)
            except BaseException:
                _discard(registry, scratch or (store.dir if made else None))
                raise
            nodes_known = nodes_known or not any(backends.backend_of(c).nodes_from_allocation
                                                 for c in pool)
            store.copy_matrix(matrix, sweep.shared_files)
            # run.json's order is the whole sweep; the selection (--ppsweep-config, -k, -m) is
            # recorded apart (session/collection.py): a subset is a partial run of the sweep
            args = [str(a) for a in config.invocation_params.args]
            RunJson(store).create(sweep, pool, [c.id for c in sweep.configs], owner={
                OwnerKey.HOST: socket.gethostname(), OwnerKey.PID: os.getpid(),
                OwnerKey.RESUME: runstatus.resume_command(args, store.run_id)}, args=args)
            if nodes_known:
                setup.record_nodes(store, pool)
            if (scratch is None and config.pluginmanager.hasplugin("html")
                    and not config.getoption("htmlpath", None)):
                config.option.htmlpath = str(store.dir / REPORT_HTML)
                config.option.self_contained_html = True
        state = RunState(worker=is_worker(config), made_folder=made)
        if nodes_known:
            state.allocated()
        quiet_at_start(state, scratch, dry_run)
        session = cls(config, matrix, sweep, pool, ids, store, plan, compare_ref, thresholds,
                      state, registry, scratch=scratch, baseline_from=baseline_from)
        if not session.worker:
            for note in plan.notes:
                session.progress(note)
        try:
            session.adaptive.start()
        except BaseException:
            _discard(registry, scratch or (store.dir if made else None))
            raise
        session._install_safety_net()
        config.stash[SESSION_KEY] = session
        return session

    def _install_safety_net(self) -> None:
        # SIGTERM and SIGHUP become a Ctrl-C (fixtures tear down); an exit without unconfigure
        # still stops every rank this process started.
        self.registry.install_atexit()
        self.signals.install()

    # -- before the first test ----------------------------------------------------------------

    def begin(self, items: list[pytest.Item]) -> None:
        """pytest_runtestloop (controller): the preflight once the selection is known, then
        measuring; with --ppsweep-adaptive, the first layout the planner boots."""
        self.preflight_and_run()
        self.adaptive.order(items)

    def worker_collected(self, ids: list[str]) -> None:
        """xdist controller, a worker's collection finished: the selection (the first one's),
        then the preflight, before any test is scheduled (not for an empty selection: that
        run connects to nothing and leaves no run folder, session.quiet)."""
        self.selection.worker_collected(ids)
        self.preflight_and_run()

    def preflight_and_run(self) -> None:
        """The preflight, once; measuring starts right after it."""
        if self.preflight.run():
            self.state.running()
            RunJson(self.store).run_status(self.state.run_status(all_measured=False))

    def measuring(self) -> None:
        """The ``ppsweep`` fixture, in the process that boots: an xdist worker takes its
        controller's slurm allocation now, and starts measuring."""
        self.signals.watch_dropped()  # a Ctrl-C dropped in a finalizer is raised again
        self.nodes.allocate()
        if self.worker and not self.state.measuring:
            self.state.running()

    # -- each test (pytest_runtest_makereport, in the process that runs it) -------------------

    def record(self, item: pytest.Item, call: pytest.CallInfo[None],
               report: pytest.TestReport) -> None:
        """Cluster time for later pool plans, the layout in the report's properties, and the
        test's outcome for a later resume."""
        params = _params(item)
        cid = params.get("ppsweep_config")
        if cid is None:
            return
        if call.when == "call":
            if "ppsweep_service" in getattr(item, "fixturenames", ()):
                self.run.context.cluster_time.worked(cid, call.duration)
            report.user_properties.append(("ppsweep_config", cid))
            if "concurrency" in params:
                report.user_properties.append(("concurrency", params["concurrency"]))
        resumed_verdict(item, report, self.store.dir)
        mark_reused(item, report)
        if not _counts_for_resume(item) or cid in self.plan.skip_configs:
            return
        if cid not in self._started:
            self._started.add(cid)
            outcomes.start(self.store, cid, self.selection.tests.get(cid, [item.nodeid]))
        if report.failed or (call.when == "call" or report.skipped):
            outcomes.record(self.store, cid, item.nodeid, report.outcome)

    def clear_progress(self) -> None:
        """pytest is about to write a test's result to the terminal: the live status line
        makes room, and pytest's row of results is open (session/progress.py)."""
        self.progress.clear_line(reopen=True)

    # -- the end (pytest_sessionfinish, controller) -------------------------------------------

    def finish(self, exitstatus: int) -> None:
        """Close the run folder once: layouts not run, results in sweep order, summary.csv,
        benchmark.json, gate.csv; then the baseline, when every test passed."""
        if not self.state.finishes:
            return
        self.state.finished(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
        self.signals.defer()
        self.progress.stop_following()  # the workers' last lines come before the summary
        self.adaptive.finish()
        not_run = self.xdist.not_run
        self._finish_profile()
        status = self._run_status()
        closed = close_folder.close(
            self.store, self.ids, not_run, self.compare_ref, self.thresholds, status
        )
        width = min(self.config.get_terminal_writer().fullwidth, 150)
        rendered = self.render.rendered = summary.render(
            closed.run_dir, closed.analysis, closed.note, width=width)
        if self.compare_ref is not None and closed.gate is not None:
            summary.render_gate(closed.run_dir, self.compare_ref, closed.gate, rendered)
        if closed.analysis is not None and closed.analysis[0].meta.status is not None:
            status = closed.analysis[0].meta.status  # with what the answers found (expected)
        rendered.terminal += summary.status_lines(status, width)
        if closed.history_note:
            rendered.terminal.append(closed.history_note)
        name = options.get(self.config, "ppsweep_save_baseline")
        if name:
            self.render.baseline = close_folder.save_baseline(
                self.store, name, options.reports_root(self.config), exitstatus
            )

    def _run_status(self) -> runstatus.RunStatus:
        """The run's status at its end (the state machine's word) with the points measured and
        missing, where it was interrupted and the command that resumes it."""
        run_json = RunJson(self.store)
        chosen = run_json.selected()
        wanted: dict[str, Any] = dict(chosen) if chosen is not None else {
            cid: self.sweep.workload_of(self.sweep.config(cid)).concurrency for cid in self.ids}
        predicted = set(run_json.adaptive_skipped())  # the planner's, by design
        rounds = []
        for row in self.store.result_rows():
            with contextlib.suppress(KeyError, ValueError):
                rounds.append((row["config_id"], int(row["concurrency"])))
        # every layout of the sweep: one that --ppsweep-config (like -k) left out is missing
        measured, missing = runstatus.measured_points(
            [c.id for c in self.sweep.configs if c.id not in predicted], wanted, rounds)
        word = self.state.run_status(all_measured=not missing)
        at: str | None = None
        if word == runstatus.INTERRUPTED:  # the last selected point that started, unfinished
            started = self.store.config_rows()
            at = next((c for c in reversed(missing) if c in wanted and c in started), None)
        resume = None if word == runstatus.COMPLETE else self.resume_command(
            every_layout=word == runstatus.PARTIAL)
        return runstatus.RunStatus(word, tuple(measured), tuple(missing), at, resume)

    def resume_command(self, *, every_layout: bool = False) -> str:
        """The command line that resumes this run in its folder (``every_layout``: a partial
        run's, which measures the layouts its selection left out)."""
        return runstatus.resume_command([str(a) for a in self.config.invocation_params.args],
                                        self.store.run_id, every_layout=every_layout)

    def _finish_profile(self) -> None:
        """profile.csv once more from every profiled layout's attribution.json (under xdist
        each worker rewrote it after its own layouts)."""
        if (self.store.dir / PROFILE_DIR).is_dir():
            tracefiles.write_table(
                self.store.dir, self.sweep.baseline, [c.id for c in self.sweep.configs]
            )

    # -- pytest_unconfigure -------------------------------------------------------------------

    def close(self) -> None:
        """Stop every rank still up, remove what this run left on ssh nodes, close the
        connections, and put back the SIGTERM/SIGHUP handlers and the atexit net."""
        if SESSION_KEY in self.config.stash:
            del self.config.stash[SESSION_KEY]
        # Every step runs even when one before it raised: a terminal closed under the run (EIO
        # on the first write) must not leave ranks up or the clusters claimed.
        steps: list[Callable[[], None]] = [self.progress.stop_following, self.progress.clear_line,
                                           self.registry.stop_ranks]
        # Nothing can have been started in a quiet run, nor by a controller before its claims
        # (a refused claim or preflight): then nothing is looked for on the nodes (an
        # unreachable node would be tried once more per node). A worker may have been stopped
        # half-way through its first launch: it looks, once it knows its nodes (a slurm
        # worker takes its allocation at its first test: before that it launched nothing).
        state = self.state
        if not state.quiet and ((self.worker and state.nodes_known) or self.preflight.claims.held):
            steps.append(self.preflight.reap_own)
        steps += [self.preflight.claims.release,  # the cluster is free once nothing is left on it
                  self.registry.close, self.registry.remove_atexit, self.signals.restore,
                  self.quiet.remove_scratch]
        state.closed()
        failed: Exception | None = None
        for step in steps:
            try:
                step()
            except Exception as exc:
                failed = failed or exc
        if failed is not None:
            raise failed
        self.signals.end_deferred()


def _discard(registry: Registry, folder: Path | None) -> None:
    """A set-up refused at configure: what it held goes (an allocation in the registry, the
    run or scratch folder this process made); nothing else was started."""
    registry.close()
    registry.remove_atexit()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


SESSION_KEY: pytest.StashKey[SweepSession] = pytest.StashKey()
"""The stash key of the plugin: the one owner object of a run (pytest's junitxml habit)."""
