"""Collection and selection: one session-scoped layout parameter per selected layout and one
``concurrency`` per C; the items a run does not need dropped or skipped with the reason; and,
once -k/-m deselected, which layouts and Cs this run selected (run.json), with where the
baseline's numbers come from when it is not among them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep import continuity
from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.folder.runfolder import RunJson, run_id_of
from pytest_ppsweep.matrix.model import Config, NoClusterFits, boot_groups, cluster_for
from pytest_ppsweep.measure.eta import SweepClock
from pytest_ppsweep.pointchecks import ExpectedFailure, validity_problems
from pytest_ppsweep.session import options

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Cluster, Sweep
    from pytest_ppsweep.run.sweeprun import SweepRun
    from pytest_ppsweep.session.noboot import QuietRun
    from pytest_ppsweep.session.progress import Progress
    from pytest_ppsweep.session.runstate import RunState
    from pytest_ppsweep.session.setup import Nodes

__all__ = [
    "ONCE_PER_LAYOUT",
    "Selection",
    "baseline_manifest",
    "baseline_ref",
    "points_from_ids",
    "record_selection",
]

# The tests that run on a layout's first boot only when [sweep] boots > 1: they search, profile
# or score the layout, and another boot would only repeat them (their markers).
ONCE_PER_LAYOUT = ("ppsweep_slo", "ppsweep_accuracy", "ppsweep_profile", "ppsweep_comm")


class Selection:
    """The session's collection hooks and the selection they make (the controller's; a worker
    only parametrises and notes its tests)."""
    def __init__(
        self,
        config: pytest.Config,
        run: SweepRun,
        ids: list[str],
        plan: continuity.Plan,
        compare_ref: Path | None,
        baseline_ref: Path | None,
        state: RunState,
        quiet: QuietRun,
        nodes: Nodes,
        progress: Progress,
    ) -> None:
        self.config = config
        self.run = run
        self.sweep = run.sweep
        self.ids = ids
        self.plan = plan
        self.compare_ref = compare_ref
        self.baseline_ref = baseline_ref  # --ppsweep-baseline-from, checked at start
        self.state = state
        self.quiet = quiet
        self.nodes = nodes
        self.progress = progress
        self.tests: dict[str, list[str]] = {}  # config id → its tests, as collected
        self.gates_deselected: list[pytest.Item] = []  # without a reference to compare with
        self.concurrencies = options.selected_concurrencies(config, self.sweep)

    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        """One session-scoped ``ppsweep_config`` per selected layout; ``concurrency`` per C. A
        profile test (``ppsweep_profile``) only for the layouts the profile window covers, an
        SLO test (``ppsweep_slo``) only for the points whose workload has an SLO."""
        ids = self.ids
        if metafunc.definition.get_closest_marker("ppsweep_profile"):
            spec = self.sweep.profile
            ids = [i for i in ids if spec is not None and spec.covers(i)]
        if metafunc.definition.get_closest_marker("ppsweep_slo"):
            ids = [i for i in ids if self._has_slo(i)]
        # One xdist group per server configuration: its points share one boot (run/boots.py).
        groups = boot_groups(self.sweep.configs)
        params = [pytest.param(i, id=i, marks=pytest.mark.xdist_group(groups.get(i, i)))
                  for i in ids]
        metafunc.parametrize("ppsweep_config", params, indirect=True, scope="session")
        if "concurrency" in metafunc.fixturenames:
            conc = self.all_concurrencies()
            metafunc.parametrize("concurrency", conc, ids=[f"c{c}" for c in conc], indirect=True)
        if self.sweep.boots > 1 and "_ppsweep_boot" in metafunc.fixturenames:
            # [sweep] boots: a layout's later boots repeat the tests of the boot and its rounds;
            # the SLO search, the profile window and the task accuracy run on its first boot
            once = any(metafunc.definition.get_closest_marker(m) for m in ONCE_PER_LAYOUT)
            boots = [1] if once else list(range(1, self.sweep.boots + 1))
            metafunc.parametrize("ppsweep_boot_no", boots, ids=[f"boot{b}" for b in boots],
                                 indirect=True, scope="session")

    def all_concurrencies(self) -> tuple[int, ...]:
        """Every C of the sweep's workloads, in first-seen order (each point keeps its own
        workload's: :meth:`drop_foreign_points`); with --ppsweep-concurrency only those."""
        named = self.sweep.workloads.values() or [self.sweep.workload]
        every = dict.fromkeys(c for w in named for c in w.concurrency)
        return tuple(c for c in every if self.concurrencies is None or c in self.concurrencies)

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

    def not_collected(self, obj: object) -> bool:
        """A test function that does not exist in this run, so that pytest neither collects nor
        counts it (its header and its final line then agree on what ran): test_comm without
        ``--ppsweep-comm`` or a ``[comm]`` table, test_accuracy without an ``[accuracy]``
        table, test_profile when no layout has a profile
        window (``--ppsweep-profile`` or ``[profile]``)."""
        marks = {getattr(m, "name", "") for m in getattr(obj, "pytestmark", [])}
        if "ppsweep_comm" in marks and self.sweep.comm is None:
            return True
        if "ppsweep_accuracy" in marks and self.sweep.accuracy is None:
            return True
        if "ppsweep_slo" in marks and not any(self._has_slo(i) for i in self.ids):
            return True
        spec = self.sweep.profile
        return "ppsweep_profile" in marks and (spec is None or not any(
            spec.covers(i) for i in self.ids))

    def deselection_note(self) -> list[str]:
        """What pytest's "N deselected" is made of when the gate's tests are part of it (they
        compare with a reference run, so they run only with ``--ppsweep-compare``): said
        where pytest prints its count after collection."""
        gates = self.gates_deselected
        if not gates:
            return []
        names = ", ".join(dict.fromkeys(getattr(i, "originalname", i.name) for i in gates))
        return [f"ppsweep: {len(gates)} deselected are the gate's tests ({names}): they compare "
                "with a reference run and run only with --ppsweep-compare RUN"]

    def _has_slo(self, config_id: str) -> bool:
        """test_slo and test_slo_no_regression (marked ``ppsweep_slo``) exist only for the
        points whose workload carries an SLO (a sweep without one looks exactly as before)."""
        return self.sweep.workload_of(self.sweep.config(config_id)).slo is not None

    def collected(self, items: list[pytest.Item]) -> None:
        """Gate tests are deselected without a reference to compare with; each layout's tests
        are noted (for resume); what is reused or already done is skipped, with the reason."""
        if self.compare_ref is None:
            gates = [i for i in items if i.get_closest_marker("ppsweep_gate")]
            if gates:
                self.config.hook.pytest_deselected(items=gates)
                items[:] = [i for i in items if not i.get_closest_marker("ppsweep_gate")]
                self.gates_deselected = gates
        self.drop_foreign_points(items)
        plan = self.plan
        for item in items:
            params = _params(item)
            cid = params.get("ppsweep_config")
            if cid is None:
                continue
            if _counts_for_resume(item):
                self.tests.setdefault(cid, []).append(item.nodeid)
            single = _single_group_only(item, self.sweep.config(str(cid)))
            if single:
                item.add_marker(pytest.mark.skip(reason=single))
                continue
            if item.get_closest_marker("ppsweep_always"):
                continue
            why = plan.skip_configs.get(cid)
            if why is None and "concurrency" in params:
                why = plan.skip_points.get(f"{cid}-c{params['concurrency']}")
            if why is None and "ppsweep_boot_no" in params and not any(
                    item.get_closest_marker(m) for m in ONCE_PER_LAYOUT):
                why = self._boot_done(str(cid), int(params["ppsweep_boot_no"]),
                                      params.get("concurrency"))
            if why:
                item.add_marker(pytest.mark.skip(reason=f"{cid}: {why}"))
                item.add_marker(pytest.mark.ppsweep_reused(plan.reused_from.get(cid, "")))
            elif "ppsweep_service" in getattr(item, "fixturenames", ()):
                expected = self.sweep.expectation(self.sweep.config(cid))
                if expected is not None:  # [[expect]]: XFAIL, or XPASS(strict) when it boots
                    item.add_marker(pytest.mark.xfail(
                        strict=True, raises=ExpectedFailure, reason=f"{cid}: {expected.text}"))

    def _boot_done(self, config_id: str, boot_no: int, concurrency: Any) -> str | None:
        """[sweep] boots, on a resume: why the tests of the point's boot ``boot_no`` need no
        boot (every C of it, or the test's C, has the rounds of that many boots done), else
        None."""
        workload = self.sweep.workload_of(self.sweep.config(config_id))
        concs = [int(concurrency)] if concurrency is not None else list(workload.concurrency)
        wanted = boot_no * workload.repeats
        done = [sum(1 for cid, c, _ in self.plan.done if cid == config_id and c == conc)
                for conc in concs]
        if done and min(done) >= wanted:
            return f"boot {boot_no}'s rounds done in this run ({min(done)} of {wanted})"
        return None

    def keep_boots_together(self, items: list[pytest.Item]) -> None:
        """After pytest's own ordering and -k/-m: the tests of one server configuration (the
        points that share a boot, ``matrix.model.boot_groups``) run together, each point's in
        its order, and its all-reduce tests (``ppsweep_comm``: the service stopped) after the
        last of them. Which points of this process will use a boot is told to the run, so a
        boot stops after the last one (run/boots.py)."""
        groups = boot_groups(self.sweep.configs)
        order: dict[str, int] = {}
        keyed = []
        for index, item in enumerate(items):
            params = _params(item)
            cid = params.get("ppsweep_config")
            group = groups.get(str(cid), "") if cid is not None else ""
            rank = order.setdefault(group, len(order)) if group else len(order) + index
            late = bool(item.get_closest_marker("ppsweep_comm"))
            # [sweep] boots: every layout's first boot, then every layout's second, …
            keyed.append(((int(params.get("ppsweep_boot_no", 1)), rank, late, index), item))
        items[:] = [item for _key, item in sorted(keyed, key=lambda k: k[0])]
        uses = {(str(p["ppsweep_config"]), int(p.get("ppsweep_boot_no", 1)))
                for i in items if "ppsweep_config" in (p := _params(i))
                and "ppsweep_service" in getattr(i, "fixturenames", ())
                and not i.get_closest_marker("skip")}
        self.run.boots.expect((self.sweep.config(cid), boot) for cid in self.ids
                              for boot in range(1, self.sweep.boots + 1) if (cid, boot) in uses)

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
        self.progress.sweep_clock = self.sweep_clock(points)
        for cid in self.ids:  # what this run does not run again, one line each
            if cid in points and cid in self.plan.skip_configs:
                self.progress(f"{cid}: reused {self.plan.reused_from.get(cid, '')}: "
                              f"{self.plan.skip_configs[cid]}")
        self.selection(points)

    def sweep_clock(self, points: dict[str, set[int]]) -> SweepClock:
        """The layouts this process boots, in order, with the rounds each runs (its Cs × its
        repeats; none for a layout reused or already done): the live status's ``layout 3/5``
        and ETA."""
        boots = self.sweep.boots
        return SweepClock({
            cid: len(points[cid]) * self.sweep.workload_of(self.sweep.config(cid)).repeats * boots
            for cid in self.ids if cid in points and cid not in self.plan.skip_configs},
            groups=boot_groups(self.sweep.configs),
            reused=sum(cid in points for cid in self.plan.skip_configs), boots=boots)

    def worker_collected(self, ids: list[str]) -> None:
        """xdist: the controller collects nothing; the first worker's test ids tell the layouts
        (``test_x[<layout>]``, ``test_x[<layout>-c<C>]``)."""
        if self.state.selected:
            return
        self.selection(points_from_ids(ids, self.ids))

    def selection(self, points: dict[str, set[int]]) -> None:
        """Record in run.json which layouts (and Cs) this run selected, so the results layer
        judges only those; when the baseline is not among them, which earlier run's baseline
        the deltas use (``--ppsweep-baseline-from``, else the newest matching run in the
        reports folder), or why there is none."""
        if self.state.worker or self.state.selected:
            return
        self.state.select(points)
        if not points:
            self.quiet.nothing_selected()
            if self.state.quiet and not self.state.dry_run:
                return
        elif not self.state.quiet:  # the run uses its clusters: a slurm cluster's allocation
            with self.quiet.refusal():
                self.nodes.allocate()
        ctx = self.run.context
        notes = record_selection(
            RunJson(ctx.store), self.sweep, ctx.clusters.all, self.ids, points,
            self.quiet.run_dir_for_lookups(), self.baseline_ref
        )
        for note in notes:
            self.progress(note)
        self.quiet.plan_dry_run(ctx, self.ids, points, notes)


# Steps defined for a layout of one serve group (its ranks' profile traces, its TP domains'
# all-reduce): what a layout of several server groups (P/D) skips, and why.
SINGLE_GROUP_STEPS = {
    "ppsweep_profile": "the profile window attributes one serve group's ranks",
    "ppsweep_comm": "the all-reduce benchmark runs on one serve group's TP domains",
}


def _single_group_only(item: pytest.Item, config: Config) -> str:
    """Why ``item`` is skipped on ``config`` (a layout of several server groups and a step
    defined for one), else ""."""
    if config.deployed is None:
        return ""
    for marker, what in SINGLE_GROUP_STEPS.items():
        if item.get_closest_marker(marker):
            return (f"{config.id}: {what}; a layout of {len(config.deployed.groups)} server "
                    "groups (P/D) is not supported by this step yet")
    return ""


def _params(item: pytest.Item) -> dict[str, Any]:
    return dict(getattr(getattr(item, "callspec", None), "params", {}))


def _counts_for_resume(item: pytest.Item) -> bool:
    # A layout is finished when the tests of its booted service ended; a test that runs anyway
    # (ppsweep_always, e.g. the gate) does not decide it, nor does a verdict read from the run
    # folder (ppsweep_verdict: a resume judges it again without booting, resumed_verdict).
    return ("ppsweep_service" in getattr(item, "fixturenames", ())
            and not item.get_closest_marker("ppsweep_always")
            and not item.get_closest_marker("ppsweep_verdict"))


def resumed_verdict(item: pytest.Item, report: pytest.TestReport, run_dir: Path) -> None:
    """A verdict test (``ppsweep_verdict``) skipped because its point finished before a resume
    counts as in an uninterrupted run: its point's verdict is judged again from the run
    folder, and an INVALID one fails (at setup: the layout is not booted again for it)."""
    params = _params(item)
    if (report.when != "setup" or not report.skipped
            or not item.get_closest_marker("ppsweep_verdict")
            or "concurrency" not in params or "ppsweep_config" not in params):
        return
    if "done in this run" not in str(report.longrepr):
        return
    found = validity_problems(run_dir, str(params["ppsweep_config"]), int(params["concurrency"]))
    if found.problems:
        report.outcome = "failed"
        report.longrepr = ("resumed point, judged from the run folder (its layout is not booted "
                           "again):\n" + "\n".join(found.problems))


def points_from_ids(nodeids: list[str], ids: list[str]) -> dict[str, set[int]]:
    """The layouts and Cs of test ids (``test_x[<layout>]``, ``test_x[<layout>-c<C>]``, maybe
    with ``-boot<N>`` ([sweep] boots) and xdist's ``@<group>`` suffix): what an xdist worker
    collected."""
    points: dict[str, set[int]] = {}
    known = sorted(ids, key=len, reverse=True)
    for nodeid in nodeids:
        if "[" not in nodeid:
            continue
        param = nodeid.rsplit("[", 1)[-1].split("]", 1)[0]
        cid = next((c for c in known if param == c or param.startswith(c + "-")), None)
        if cid is None:
            continue
        conc = points.setdefault(cid, set())
        rest = re.sub(r"-?boot\d+$", "", param[len(cid) + 1 :])  # [sweep] boots' id
        if match := re.fullmatch(r"c(\d+)", rest):
            conc.add(int(match[1]))
    return points


def baseline_manifest(sweep: Sweep, pool: tuple[Cluster, ...]) -> dict[str, Any] | None:
    """The manifest this run would write for the baseline layout (None: no cluster fits it)."""
    config = sweep.config(sweep.baseline)
    try:
        cluster = cluster_for(pool, config)
    except NoClusterFits:
        return None
    return manifest.build(sweep, cluster, config)


def baseline_ref(config: pytest.Config, sweep: Sweep, pool: tuple[Cluster, ...]) -> Path | None:
    """--ppsweep-baseline-from: the run folder, checked before anything boots. Its baseline
    must pass the reuse check against the manifest this run would write for the baseline;
    otherwise a usage error lists every difference."""
    ref = options.reference(config, "ppsweep_baseline_from")
    if ref is None:
        return None
    flag = f"--ppsweep-baseline-from {options.get(config, 'ppsweep_baseline_from')}"
    wanted = baseline_manifest(sweep, pool)
    if wanted is None:
        raise pytest.UsageError(
            f"{flag}: no cluster of the pool fits the baseline {sweep.baseline}; cannot compare "
            "its manifest"
        )
    ok, reasons = continuity.reusable(ref, sweep.baseline, wanted)
    if not ok:
        raise pytest.UsageError(
            f"{flag}: the baseline {sweep.baseline} of {ref} cannot stand for this run's: "
            + "; ".join(reasons)
        )
    return ref


def record_selection(
    run_json: RunJson,
    sweep: Sweep,
    pool: tuple[Cluster, ...],
    ids: list[str],
    points: dict[str, set[int]],
    run_dir: Path,
    baseline_from: Path | None,
) -> list[str]:
    """Record in run.json the selection (the layouts and Cs the results layer judges) and,
    when the baseline is not selected, which earlier run's baseline the deltas use
    (``--ppsweep-baseline-from``, else the newest matching run in the reports folder) or why
    there is none; returns the progress lines that say so."""
    selected = {cid: points[cid] for cid in ids if cid in points}
    base = sweep.baseline
    if base in points:
        run_json.selection(selected)
        return [] if baseline_from is None else [
            f"--ppsweep-baseline-from {baseline_from.name}: not used, the baseline {base} runs "
            "in this run"
        ]
    found, note, notes = _earlier_baseline(sweep, pool, run_dir, baseline_from)
    if found is None:
        run_json.selection(selected, baseline_note=note)
        return [*notes, note]
    run_json.selection(selected, baseline_run=run_id_of(found),
                       baseline_path=str(found.resolve()), baseline_chosen=note)
    return [*notes, f"baseline {base} not in this run: deltas vs its rounds in run "
                    f"{run_id_of(found)} ({note})"]


def _earlier_baseline(
    sweep: Sweep, pool: tuple[Cluster, ...], run_dir: Path, baseline_from: Path | None
) -> tuple[Path | None, str, list[str]]:
    base = sweep.baseline
    if baseline_from is not None:
        return baseline_from, "--ppsweep-baseline-from, manifest identical except layout", []
    wanted = baseline_manifest(sweep, pool)
    if wanted is None:
        return None, (
            f"baseline {base} is not in this run and no cluster of the pool fits it: no deltas"
        ), []
    root = run_dir.parent
    found, skipped = continuity.earlier_baseline(root, base, wanted, exclude=run_dir)
    notes = [f"baseline {base}: run {why}"[:500] for why in skipped[:3]]
    if found is not None:
        return found, (
            "the newest run in the reports folder whose manifest is identical except layout"
        ), notes
    checked = f" ({len(skipped)} earlier run(s) differ)" if skipped else ""
    return None, (f"baseline {base} is not in this run and no earlier run in {root} has a "
                  f"matching one{checked}: no deltas"), notes


REUSED = "ppsweep_reused"  # the TestReport attribute: the run a skipped test's point is kept from


def reused_status(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """A test skipped because its point is reused (from another run, or done before this
    run's resume): ``reused``, ``R`` and ``REUSED <run id>`` instead of ``s`` and ``SKIPPED``
    (pytest_report_teststatus); None for any other report."""
    run = getattr(report, REUSED, "")
    if not run or not report.skipped:
        return None
    return "reused", "R", f"REUSED {run}"


def mark_reused(item: pytest.Item, report: pytest.TestReport) -> None:
    """Carry the reused run's id on the report of a reused point's skipped test (it reaches
    an xdist controller with the report)."""
    marker = item.get_closest_marker("ppsweep_reused")
    if marker is not None and report.skipped and marker.args and marker.args[0]:
        setattr(report, REUSED, str(marker.args[0]))
