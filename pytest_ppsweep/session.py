"""The one object that owns a sweep run inside pytest (pytest's junitxml habit: one owner under
one typed stash key, created in ``pytest_configure``, closed in ``pytest_unconfigure``).

:class:`SweepSession` holds everything the run needs: the loaded sweep, the cluster pool, the
selected layouts, the run folder, the continuity plan, the gate's reference and thresholds, the
progress reporter, the :class:`~pytest_ppsweep.sweeprun.SweepRun`, the registry of live ranks
and connections, the pool leases (xdist controller), the SIGTERM/SIGHUP handlers it installed
and, once the session finished, what the render hooks show. plugin.py only forwards hooks to it.

Its life: :meth:`start` (configure: load, check the launchers, open the run folder, plan reuse
or resume), :meth:`preflight` (session start, controller: leftovers, node checks, metadata),
:meth:`selection` (collection finished, controller: the layouts and Cs left after -k/-m, and
where the baseline's numbers come from when it is not among them), :meth:`record` (each test
report: cluster time, resume bookkeeping), :meth:`finish` (session
finish, controller: not-run layouts, sorted results, summary.csv, benchmark.json, gate.csv,
the baseline), :meth:`close` (unconfigure: stop every rank, reap, restore the handler).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep import continuity, options, runsetup
from pytest_ppsweep.cluster import backends
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.continuity import outcomes
from pytest_ppsweep.measure.runstore import RunStore
from pytest_ppsweep.pool.lease import WORKER_CLUSTER, WORKER_PLAN, WORKER_RUN_ID
from pytest_ppsweep.profile import summary as profile_summary
from pytest_ppsweep.progress import Progress
from pytest_ppsweep.report import summary
from pytest_ppsweep.stash import SESSION_KEY

if TYPE_CHECKING:
    from pytest_ppsweep.adaptivesweep import AdaptiveSweep
    from pytest_ppsweep.matrix.model import Cluster, Sweep
    from pytest_ppsweep.pool.lease import Pool
    from pytest_ppsweep.sweeprun import SweepRun

__all__ = ["SweepSession"]

NO_HTML = (
    "ppsweep: pytest-html is not active (-p no:html): no HTML report; the run folder has every "
    "table"
)


# SIGTERM (kill, a CI timeout) and SIGHUP (the terminal closed, the SSH session dropped) end the
# run like a Ctrl-C: fixtures tear every rank down and the session stops what is left.
STOP_SIGNALS = tuple(
    sig for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if sig is not None
)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn the signal into pytest's Ctrl-C path so fixtures tear every rank down.
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


# Once every layout is torn down only the report is left to write: a Ctrl-C, SIGTERM or SIGHUP
# then waits until it is written (a second one stops at once), and ends the process after
# pytest_unconfigure with that same signal, so the caller still sees an interrupted run.
REPORT_SIGNALS = (signal.SIGINT, *STOP_SIGNALS)


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


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
    ) -> None:
        self.config = config
        self.matrix = matrix
        self.sweep = sweep
        self.pool = pool  # the clusters this process may boot on (a worker: its leased one)
        self.ids = ids
        self.store = store
        self.plan = plan
        self.compare_ref = compare_ref
        self.thresholds = thresholds
        self.worker = is_worker(config)
        self.progress = Progress(config, store.dir / "progress.log")
        self.registry = Registry()
        from pytest_ppsweep.sweeprun import SweepRun  # measuring stack: only when a sweep runs

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
        self.leases: Pool | None = None  # xdist controller: which worker holds which cluster
        self.rendered: summary.Rendered | None = None  # set by finish()
        self.baseline: list[str] = []  # what saving the baseline said
        self._tests: dict[str, list[str]] = {}  # config id → its tests, as collected
        self._started: set[str] = set()  # layouts whose outcomes this process records
        self.baseline_ref: Path | None = None  # --ppsweep-baseline-from, checked at start
        self.selected: dict[str, set[int]] | None = None  # set by selection()
        self._previous_handlers: dict[int, Any] = {}
        self._report_handlers: dict[int, Any] = {}  # while the report is written (finish)
        self._deferred: int | None = None  # a stop signal received while the report is written
        self.adaptive: AdaptiveSweep | None = None  # --ppsweep-adaptive (set by start)

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
        # Read once, before anything boots: a bad reference or threshold fails now.
        compare_ref = options.reference(config, "ppsweep_compare")
        thresholds = options.thresholds(config, sweep)
        baseline_ref: Path | None = None
        if is_worker(config):
            winput = config.workerinput  # type: ignore[attr-defined]
            # Workers re-parse the command line, where --dist may be absent: group the layouts
            # (xdist suffixes node ids with @<xdist_group>) as the controller's scheduler expects.
            config.option.loadgroup = True
            pool = tuple(c for c in pool if c.name == winput[WORKER_CLUSTER])
            store = runsetup.open_store(config, sweep, winput[WORKER_RUN_ID])
            plan = continuity.Plan.from_builtin(winput[WORKER_PLAN])
        else:
            runsetup.check_workers(config, pool)
            reuse_ref = options.reference(config, "ppsweep_reuse")
            baseline_ref = runsetup.baseline_ref(config, sweep, pool)
            store = runsetup.open_store(config, sweep, None)
            plan = runsetup.plan(config, sweep, pool, store, ids, reuse_ref)
            store.copy_matrix(matrix)
            runsetup.write_run_json(store, sweep, pool, ids)
            if config.pluginmanager.hasplugin("html") and not config.getoption("htmlpath", None):
                config.option.htmlpath = str(store.dir / "report.html")
                config.option.self_contained_html = True
        session = cls(config, matrix, sweep, pool, ids, store, plan, compare_ref, thresholds)
        session.baseline_ref = baseline_ref
        if not session.worker:
            for note in plan.notes:
                session.progress(note)
        session._start_adaptive()
        session._install_safety_net()
        config.stash[SESSION_KEY] = session
        return session

    def _install_safety_net(self) -> None:
        # SIGTERM and SIGHUP become a Ctrl-C (fixtures tear down); an exit without unconfigure
        # still stops every rank this process started.
        self.registry.install_atexit()
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous_handlers[sig] = signal.signal(sig, _on_sigterm)

    # -- collection ---------------------------------------------------------------------------

    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        """One session-scoped ``ppsweep_config`` per selected layout; ``concurrency`` per C."""
        params = [pytest.param(i, id=i, marks=pytest.mark.xdist_group(i)) for i in self.ids]
        metafunc.parametrize("ppsweep_config", params, indirect=True, scope="session")
        if "concurrency" in metafunc.fixturenames:
            conc = self.all_concurrencies()
            metafunc.parametrize("concurrency", conc, ids=[f"c{c}" for c in conc], indirect=True)

    def all_concurrencies(self) -> tuple[int, ...]:
        """Every C of the sweep's workloads, in first-seen order (each point keeps its own
        workload's: :meth:`drop_foreign_points`)."""
        named = self.sweep.workloads.values() or [self.sweep.workload]
        return tuple(dict.fromkeys(c for w in named for c in w.concurrency))

    def drop_foreign_points(self, items: list[pytest.Item]) -> None:
        """Items of a C that the point's workload does not run are deselected (several
        workloads with different concurrencies)."""
        if not self.sweep.workloads:
            return
        known = set(self.sweep.config(i).id for i in self.ids)
        foreign = []
        for item in items:
            params = _params(item)
            cid, conc = params.get("ppsweep_config"), params.get("concurrency")
            if cid in known and conc is not None:
                wanted = self.sweep.workload_of(self.sweep.config(str(cid))).concurrency
                if int(conc) not in wanted:
                    foreign.append(item)
        if foreign:
            self.config.hook.pytest_deselected(items=foreign)
            items[:] = [i for i in items if i not in foreign]

    def collected(self, items: list[pytest.Item]) -> None:
        """Gate tests are deselected without a reference to compare with; each layout's tests
        are noted (for resume); what is reused or already done is skipped, with the reason."""
        self._deselect_unprofiled(items)
        self._drop_without_slo(items)  # before the gate's deselection: they do not exist
        if self.compare_ref is None:
            gates = [i for i in items if i.get_closest_marker("ppsweep_gate")]
            if gates:
                self.config.hook.pytest_deselected(items=gates)
                items[:] = [i for i in items if not i.get_closest_marker("ppsweep_gate")]
        self.drop_foreign_points(items)
        self._deselect_comm(items)
        plan = self.plan
        for item in items:
            params = _params(item)
            cid = params.get("ppsweep_config")
            if cid is None:
                continue
            if _counts_for_resume(item):
                self._tests.setdefault(cid, []).append(item.nodeid)
            if item.get_closest_marker("ppsweep_always"):
                continue
            why = plan.skip_configs.get(cid)
            if why is None and "concurrency" in params:
                why = plan.skip_points.get(f"{cid}-c{params['concurrency']}")
            if why:
                item.add_marker(pytest.mark.skip(reason=f"{cid}: {why}"))

    def _deselect_unprofiled(self, items: list[pytest.Item]) -> None:
        """Profile tests (``ppsweep_profile``) are collected only for the layouts the profile
        window covers: with --ppsweep-profile, or those of the [profile] table. The others are
        dropped, not reported as deselected: without a profile window they do not exist (a
        run without one looks exactly as before the profile window was added)."""
        spec = self.sweep.profile

        def unprofiled(item: pytest.Item) -> bool:
            if not item.get_closest_marker("ppsweep_profile"):
                return False
            cid = _params(item).get("ppsweep_config")
            return spec is None or (cid is not None and not spec.covers(str(cid)))

        if any(unprofiled(i) for i in items):
            items[:] = [i for i in items if not unprofiled(i)]

    def _deselect_comm(self, items: list[pytest.Item]) -> None:
        """test_comm (marked ``ppsweep_comm``) is in the run only with ``--ppsweep-comm`` or a
        ``[comm]`` table in the sweep file. Without them it is dropped, not reported as
        deselected: a sweep that did not ask for it runs and counts exactly as before."""
        if self.sweep.comm is not None:
            return
        items[:] = [i for i in items if not i.get_closest_marker("ppsweep_comm")]

    def _drop_without_slo(self, items: list[pytest.Item]) -> None:
        """test_slo (marked ``ppsweep_slo``) exists only for the layouts whose workload carries
        an SLO; the others' are dropped, not deselected (a sweep without an SLO looks exactly
        as before)."""

        def without(item: pytest.Item) -> bool:
            if not item.get_closest_marker("ppsweep_slo"):
                return False
            cid = _params(item).get("ppsweep_config")
            return cid is None or self.sweep.workload_of(self.sweep.config(str(cid))).slo is None

        if any(without(i) for i in items):
            items[:] = [i for i in items if not without(i)]

    def collection_finished(self, items: list[pytest.Item]) -> None:
        """The layouts and Cs whose tests are left after -k/-m deselection (controller)."""
        points: dict[str, set[int]] = {}
        for item in items:
            params = _params(item)
            cid = params.get("ppsweep_config")
            if cid is None:
                continue
            conc = points.setdefault(str(cid), set())
            if "concurrency" in params:
                conc.add(int(params["concurrency"]))
        self.selection(points)

    def worker_collected(self, ids: list[str]) -> None:
        """xdist: the controller collects nothing; the first worker's test ids tell the layouts
        (``test_x[<layout>]``, ``test_x[<layout>-c<C>]``)."""
        if self.selected is not None:
            return
        self.selection(runsetup.points_from_ids(ids, self.ids))

    def selection(self, points: dict[str, set[int]]) -> None:
        """Record in run.json which layouts (and Cs) this run selected, so the results layer
        judges only those; when the baseline is not among them, which earlier run's baseline
        the deltas use (``--ppsweep-baseline-from``, else the newest matching run in the
        reports folder), or why there is none."""
        if self.worker or self.selected is not None:
            return
        self.selected = points
        fields, notes = runsetup.selection_fields(
            self.sweep, self.pool, self.ids, points, self.store.dir, self.baseline_ref
        )
        for note in notes:
            self.progress(note)
        self.store.update_json("metadata/run.json", **fields)

    # -- before the first boot (pytest_sessionstart, controller) ------------------------------

    def preflight(self) -> None:
        """Leftovers of earlier runs (ssh clusters: by label; local clusters: labelled ranks on
        this cluster's addresses and ports) are reported, or removed with --ppsweep-reap; then
        every node of every cluster is checked at once (free ports included). Any problem is a
        usage error listing all of them, and nothing is booted."""
        if self.worker or self.config.option.collectonly:
            return
        from pytest_ppsweep.cluster import nodeinfo, preflight, reap

        for cluster in self.pool:
            if cluster.kind == "ssh":
                # a node that cannot be asked is left to the preflight, which reports it
                leftovers = reap.find(cluster, errors=[], registry=self.registry)
                leftovers = self._stop_own_leftovers(cluster, leftovers)
            else:
                # this machine is shared: only the ranks of other runs that collide with this
                # cluster's addresses and ports (a busy port is then refused by the preflight)
                leftovers = reap.find_blocking(cluster, exclude_run=self.store.run_id)
            if leftovers:
                if self.config.getoption("ppsweep_reap"):
                    failed = reap.remove(cluster, leftovers, registry=self.registry)
                    if failed:
                        raise pytest.UsageError(
                            f"--ppsweep-reap: cluster {cluster.name}: could not remove:\n"
                            + "\n".join(f"  - {f}" for f in failed)
                        )
                    self.progress(
                        f"cluster {cluster.name}: removed {len(leftovers)} leftover rank(s) of "
                        "earlier runs:\n" + reap.describe(leftovers)
                    )
                else:
                    self.progress(
                        f"WARNING: cluster {cluster.name}: {len(leftovers)} rank(s) of earlier "
                        f"runs are still on the nodes (remove them with --ppsweep-reap):\n"
                        + reap.describe(leftovers)
                    )
            problems = preflight.check(self.sweep, cluster, self.registry)
            if problems:
                raise pytest.UsageError(preflight.message(cluster, problems))
            self.store.write_json(
                f"metadata/nodes-{cluster.name}.json",
                nodeinfo.metadata(self.sweep, cluster, self.registry),
            )

    def _stop_own_leftovers(self, cluster: Cluster, leftovers: list[Any]) -> list[Any]:
        """--ppsweep-resume on an ssh cluster: the ranks the interrupted run itself left (a
        SIGKILLed pytest tears nothing down) are stopped first, as ``continuity.plan.resume``
        does for local ranks; without this the resume's preflight refused the run's own
        containers as busy ports. Other runs' leftovers are returned: they stay the user's to
        reap. A fresh run id never matches a leftover, so only a resume stops anything."""
        from pytest_ppsweep.cluster import reap

        if not options.get(self.config, "ppsweep_resume"):
            return leftovers
        own = [x for x in leftovers if x.run == self.store.run_id]
        if not own:
            return leftovers
        failed = reap.remove(cluster, own, registry=self.registry)
        if failed:
            raise pytest.UsageError(
                f"--ppsweep-resume: cluster {cluster.name}: could not stop the ranks the "
                "interrupted run left:\n" + "\n".join(f"  - {f}" for f in failed)
            )
        self.progress(
            f"cluster {cluster.name}: stopped {len(own)} rank(s) left by the interrupted run "
            f"{self.store.run_id}:\n" + reap.describe(own)
        )
        return [x for x in leftovers if x.run != self.store.run_id]

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
                self.run.worked(cid, call.duration)
            report.user_properties.append(("ppsweep_config", cid))
            if "concurrency" in params:
                report.user_properties.append(("concurrency", params["concurrency"]))
        if not _counts_for_resume(item) or cid in self.plan.skip_configs:
            return
        if cid not in self._started:
            self._started.add(cid)
            outcomes.start(self.store, cid, self._tests.get(cid, [item.nodeid]))
        if report.failed or (call.when == "call" or report.skipped):
            outcomes.record(self.store, cid, item.nodeid, report.outcome)

    def clear_progress(self) -> None:
        """pytest is about to write to the terminal: the live status line makes room."""
        self.progress.clear_line()

    # -- the end (pytest_sessionfinish, controller) -------------------------------------------

    def finish(self, exitstatus: int) -> None:
        """Close the run folder once: layouts not run, results in sweep order, summary.csv,
        benchmark.json, gate.csv; then the baseline, when every test passed."""
        if self.worker or self.rendered is not None:
            return
        self.defer_signals()
        self.progress.stop_following()  # the workers' last lines come before the summary
        self._finish_adaptive()
        not_run = dict(self.leases.not_run) if self.leases else {}
        self._finish_profile()
        self.rendered = summary.finish(
            self.store, self.ids, not_run, self.compare_ref, self.thresholds
        )
        name = options.get(self.config, "ppsweep_save_baseline")
        if name:
            self.baseline = summary.save_baseline(
                self.store, name, options.reports_root(self.config), exitstatus
            )

    # -- the adaptive sweep (--ppsweep-adaptive) ----------------------------------------------

    def _start_adaptive(self) -> None:
        """With --ppsweep-adaptive: the planner decides the order of the layouts and which to
        skip (serial runs only: one process must see every layout's rounds)."""
        tolerance = options.adaptive_tolerance(self.config)
        if tolerance is None:
            return
        if self.worker or self.config.getoption("numprocesses", None):
            raise pytest.UsageError(
                "--ppsweep-adaptive: expected a serial run (one process decides which layout "
                "to boot after each one), found pytest-xdist -n; drop -n or the option")
        from pytest_ppsweep.adaptivesweep import AdaptiveSweep

        cluster = self.pool[0]
        self.adaptive = AdaptiveSweep(self.sweep, self.ids, self.store.dir, cluster.gpus,
                                      cluster.gpus_per_node, tolerance, self.progress)
        self.run.third_repeat = self.adaptive.third_repeat
        # a point whose third repeat the planner skipped has two: the verdict accepts them
        self.store.update_json("metadata/run.json", adaptive=True,
                               min_repeats=min(self.sweep.min_repeats, 2))
        self.progress(f"adaptive: the planner orders the layouts and stops when the best is "
                      f"decided (tolerance {tolerance:.0%})")

    def adaptive_order(self, items: list[pytest.Item], start: int = 0) -> None:
        """Put the layout the planner boots next at ``items[start:]``'s front; refit first
        when a layout was just measured (``start`` > 0)."""
        if self.adaptive is None or self.config.option.collectonly:
            return
        blocks: dict[str, list[pytest.Item]] = {}
        others: list[pytest.Item] = []
        for item in items[start:]:
            cid = _params(item).get("ppsweep_config")
            (blocks.setdefault(str(cid), []) if cid is not None else others).append(item)
        if not blocks:
            return
        if start > 0:
            self.adaptive.refit()
        chosen = self.adaptive.next_layout(list(blocks))
        for cid in blocks:
            why = self.adaptive.skip_reason(cid)
            if why:
                self.plan.skip_configs[cid] = why
        order = [*([chosen] if chosen else []), *(c for c in blocks if c != chosen)]
        items[start:] = others + [item for cid in order for item in blocks[cid]]

    def adaptive_after(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """After a layout's last test: refit and choose the next layout."""
        if self.adaptive is None:
            return
        cid = _params(item).get("ppsweep_config")
        if cid is None or (nextitem is not None
                           and _params(nextitem).get("ppsweep_config") == cid):
            return
        if self.adaptive.skip_reason(str(cid)):
            return
        items = item.session.items
        if item in items:
            self.adaptive_order(items, items.index(item) + 1)

    def adaptive_skip(self, item: pytest.Item) -> None:
        """A test of a layout the planner skipped is skipped with the reason."""
        if self.adaptive is None:
            return
        cid = _params(item).get("ppsweep_config")
        why = self.adaptive.skip_reason(str(cid)) if cid is not None else None
        if why:
            pytest.skip(f"{cid}: {why}")

    def _finish_adaptive(self) -> None:
        """The last fit, the plan, and the skipped layouts out of the judged selection."""
        if self.adaptive is None:
            return
        skipped = self.adaptive.finish()
        if skipped:
            self.progress(f"adaptive: {len(skipped)} layout(s) predicted, not measured: "
                          f"{', '.join(skipped)} (planner/plan.csv)")
            path = self.store.dir / "metadata" / "run.json"
            chosen = json.loads(path.read_text(encoding="utf-8")).get("selected")
            if isinstance(chosen, dict):
                self.store.update_json("metadata/run.json", selected={
                    k: v for k, v in chosen.items() if k not in skipped},
                    adaptive_skipped=dict(self.adaptive.skipped))

    def _finish_profile(self) -> None:
        """profile.csv once more from every profiled layout's attribution.json (under xdist
        each worker rewrote it after its own layouts)."""
        if (self.store.dir / "profile").is_dir():
            profile_summary.write_table(
                self.store.dir, self.sweep.baseline, [c.id for c in self.sweep.configs]
            )

    # -- render hooks: show what finish() computed --------------------------------------------

    def html_summary(self, prefix: list[str]) -> None:
        if self.rendered is not None:
            prefix.extend(self.rendered.html)

    def terminal(self, reporter: Any) -> None:
        if self.worker:
            return
        self.progress.clear_line()
        for config_id, why in self.leases.not_run.items() if self.leases else ():
            reporter.write_line(f"NOT RUN {config_id}: {why}", red=True)
        result = self.rendered or summary.Rendered(terminal=["no summary: the run did not end"])
        reporter.write_sep("=", f"ppsweep summary: {self.store.run_id}")
        for line in result.terminal:
            reporter.write_line(line)
        if result.gate:
            reporter.write_sep("=", f"ppsweep gate vs {self.compare_ref}")
            for line in result.gate:
                reporter.write_line(line, red=line.startswith("REGRESSION"))
        reporter.write_line(f"run folder: {self.store.dir}")
        html = self.config.getoption("htmlpath", None)
        if not self.config.pluginmanager.hasplugin("html"):
            reporter.write_line(NO_HTML)
        elif html:
            reporter.write_line(f"report: {Path(html).resolve()}")
        for line in self.baseline:
            reporter.write_line(line)

    # -- xdist controller ---------------------------------------------------------------------

    def lease_pool(self) -> Pool:
        if self.leases is None:
            from pytest_ppsweep.pool.lease import Pool

            self.leases = Pool({c.name: c for c in self.pool})
        return self.leases

    def auto_workers(self) -> int:
        return len(self.pool)

    def scheduler(self, log: Any) -> Any:
        """One worker per cluster: layouts go only to workers whose cluster fits them, planned
        from the durations an earlier run of the sweep measured."""
        from pytest_ppsweep.pool.balance import expected_durations
        from pytest_ppsweep.pool.scheduling import PoolScheduling

        expected = expected_durations(
            self.store.dir.parent,
            self.sweep.name,
            self.ids,
            self.store.run_id,
            skipped=self.plan.skip_configs,  # reused or finished before a resume
        )
        self.progress(f"pool plan: {expected.describe()}")
        return PoolScheduling(
            self.config, log, self.sweep, self.lease_pool(), expected, self.progress
        )

    def configure_node(self, node: Any) -> None:
        """Lease a cluster to the worker; it writes into this run folder, and its progress
        lines there are shown on this terminal."""
        self.progress.follow_workers()
        cluster = self.lease_pool().lease(node.gateway.id)
        node.workerinput[WORKER_CLUSTER] = cluster.name
        node.workerinput[WORKER_RUN_ID] = self.store.run_id
        node.workerinput[WORKER_PLAN] = self.plan.as_builtin()

    def node_down(self, node: Any, error: Any) -> None:
        """The cluster returns to the pool; a crashed worker's ranks are reaped."""
        cluster = self.lease_pool().release(node.gateway.id)
        if error and cluster is not None:
            from pytest_ppsweep.cluster.reap import reap_local

            pids = reap_local(self.store.run_id, cluster.name)
            self.progress(
                f"worker {node.gateway.id} crashed; cluster {cluster.name} back in the pool; "
                f"stopped {len(pids)} leftover rank process(es)"
            )

    # -- the report phase -----------------------------------------------------------------------

    def defer_signals(self) -> None:
        """From pytest_sessionfinish on (every rank is stopped): a stop signal lets the report
        be written and ends the process afterwards (:meth:`close`); a second one stops now."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in REPORT_SIGNALS:
            self._report_handlers[sig] = signal.signal(sig, self._on_report_signal)

    def _on_report_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._deferred is not None:
            raise KeyboardInterrupt(f"signal {name} (second, while the report was written)")
        self._deferred = signum
        # os.write: no lock a signal could find held (the progress writer's)
        os.write(2, f"\nppsweep: {name} while the report is written: finishing it, then "
                    f"stopping (send it again to stop now)\n".encode())

    def _restore_report_handlers(self) -> None:
        """Put back the handlers of before the report (the run's own SIGTERM/SIGHUP ones)."""
        for sig, previous in self._report_handlers.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._report_handlers = {}

    def _end_deferred(self) -> None:
        """End the process with the signal that waited for the report, if one did."""
        if self._deferred is not None:
            sig, self._deferred = self._deferred, None
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)

    # -- pytest_unconfigure -------------------------------------------------------------------

    def close(self) -> None:
        """Stop every rank still up, remove what this run left on ssh nodes, close the
        connections, and put back the SIGTERM/SIGHUP handlers and the atexit net."""
        if SESSION_KEY in self.config.stash:
            del self.config.stash[SESSION_KEY]
        self.progress.stop_following()
        self.progress.clear_line()
        self.registry.stop_ranks()
        self._reap_own()
        self.registry.close()
        self.registry.remove_atexit()
        self._restore_report_handlers()  # first: they put back the run's own handlers
        if self._previous_handlers and threading.current_thread() is threading.main_thread():
            for sig, previous in self._previous_handlers.items():
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
            self._previous_handlers = {}
        self._end_deferred()

    def _reap_own(self) -> None:
        # Whatever this run still has on the nodes of an ssh cluster (a rank whose start was
        # interrupted, a worker that crashed) is removed by its run label.
        from pytest_ppsweep.cluster import reap

        for cluster in self.pool:
            if cluster.kind != "ssh":
                continue
            errors: list[str] = []
            left = reap.find(
                cluster, run_id=self.store.run_id, errors=errors, registry=self.registry
            )
            failed = reap.remove(cluster, left, registry=self.registry) if left else []
            for problem in errors + failed:
                sys.stderr.write(f"ppsweep: cleanup of cluster {cluster.name}: {problem}\n")


def _params(item: pytest.Item) -> dict[str, Any]:
    return dict(getattr(getattr(item, "callspec", None), "params", {}))


def _counts_for_resume(item: pytest.Item) -> bool:
    # A layout is finished when the tests of its booted service ended; a test that runs anyway
    # (ppsweep_always, e.g. the gate) does not decide it.
    return "ppsweep_service" in getattr(item, "fixturenames", ()) and not item.get_closest_marker(
        "ppsweep_always"
    )
