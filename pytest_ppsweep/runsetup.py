"""Run set-up before the first test (controller, and the worker's view of it): the run folder
(new, the controller's, or a resumed one), ``metadata/run.json``, the reuse/resume plan, and the
checks of the xdist pool. Options are read by :mod:`.options`; this module only acts on them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep import continuity, options
from pytest_ppsweep.matrix.axes import point_facts
from pytest_ppsweep.measure.runstore import RunStore, new_run_id

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Cluster, Sweep

__all__ = [
    "axis_fields",
    "baseline_manifest",
    "baseline_ref",
    "check_workers",
    "open_store",
    "plan",
    "points_from_ids",
    "run_id",
    "selection_fields",
    "write_run_json",
]


def plan(
    config: pytest.Config,
    sweep: Sweep,
    pool: tuple[Cluster, ...],
    store: RunStore,
    ids: list[str],
    reuse_ref: Path | None,
) -> continuity.Plan:
    """What continuity decides before any boot: the layouts and points to skip, and why."""
    try:
        plan = continuity.Plan()
        if options.get(config, "ppsweep_resume"):
            plan = continuity.resume(sweep, pool, store, ids)
        if reuse_ref is not None:
            plan = continuity.reuse(sweep, pool, store, ids, reuse_ref, plan)
    except continuity.ContinuityError as exc:
        raise pytest.UsageError(str(exc)) from None
    return plan


def write_run_json(
    store: RunStore, sweep: Sweep, pool: tuple[Cluster, ...], ids: list[str]
) -> None:
    """metadata/run.json: what the report needs to know about the run (updated at each boot)."""
    simulated = all(c.server_module.startswith("pytest_ppsweep.sim") for c in pool)
    store.write_json(
        "metadata/run.json",
        {
            "run_id": store.run_id,
            "sweep": sweep.name,
            "baseline": sweep.baseline,
            "order": ids,
            "cluster": ",".join(c.name for c in pool),
            "hosts": [h.address for c in pool for h in c.hosts],
            "simulated": simulated,
            # The real factor comes from the server info of the first boot.
            "time_scale": 1.0,
            "image": sweep.image,
            "model_path": sweep.model_path,
            "matrix": str(sweep.path),
            "spread_threshold": sweep.spread_threshold,
            "min_repeats": sweep.min_repeats,
            "spread_rule": sweep.spread_rule,
            "max_repeats": sweep.max_repeats,
            "workload": json.loads(json.dumps(sweep.workload.__dict__)),
            "sglang_version": None,
            **axis_fields(sweep),
        },
    )


def open_store(config: pytest.Config, sweep: Sweep, run_id: str | None) -> RunStore:
    """The run folder: a new one, the controller's (xdist workers), or a resumed one."""
    resumed = options.get(config, "ppsweep_resume")
    if resumed and not run_id:
        folder = options.path_arg(config, resumed)
        if not folder.is_dir():
            folder = options.reports_root(config) / resumed
        if not (folder / "metadata" / "run.json").is_file():
            raise pytest.UsageError(
                f"--ppsweep-resume {resumed}: expected a run folder with metadata/run.json, "
                f"found none at {folder}"
            )
        return RunStore(folder.parent, folder.name)
    if resumed and run_id:
        folder = options.path_arg(config, resumed)
        root = folder.parent if folder.is_dir() else options.reports_root(config)
        return RunStore(root, run_id)
    rid = run_id or options.get(config, "ppsweep_run_id") or new_run_id(sweep.name)
    return RunStore(options.reports_root(config), rid)


def check_workers(config: pytest.Config, pool: tuple[Cluster, ...]) -> None:
    """xdist: at most one worker per cluster, and loadgroup scheduling (one boot per layout)."""
    n = getattr(config.option, "numprocesses", None)
    if not n:
        return
    names = ", ".join(c.name for c in pool)
    if int(n) > len(pool):
        raise pytest.UsageError(
            f"-n {n}: the cluster pool has {len(pool)} cluster(s) ({names}) and each worker needs "
            f"one of its own (two workers must never boot two layouts on the same nodes); use "
            f"-n {len(pool)} or -n auto, or add clusters with --ppsweep-cluster a,b"
        )
    explicit = any(a == "-d" or a.startswith("--dist") for a in config.invocation_params.args)
    dist = getattr(config.option, "dist", "no")
    if explicit and dist != "loadgroup":
        raise pytest.UsageError(
            f"--dist {dist}: a sweep needs --dist loadgroup (each layout is one xdist_group, "
            "booted once on one worker)"
        )
    config.option.dist = "loadgroup"


def baseline_manifest(sweep: Sweep, pool: tuple[Cluster, ...]) -> dict[str, Any] | None:
    """The manifest this run would write for the baseline layout (None: no cluster fits it)."""
    from pytest_ppsweep.continuity import manifest
    from pytest_ppsweep.matrix.model import NoClusterFits, cluster_for

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


def run_id(folder: Path) -> str:
    """The run id in ``folder``'s run.json (a named baseline keeps its run's), else its name."""
    try:
        raw = json.loads((folder / "metadata" / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return folder.name
    return str(raw.get("run_id") or folder.name) if isinstance(raw, dict) else folder.name


def axis_fields(sweep: Sweep) -> dict[str, Any]:
    """run.json keys of an axis sweep (results/confound.py reads them): each point's layout,
    axis values and workload, the axes, the comparison baselines and the named workloads."""
    if not (sweep.axis_names or sweep.workloads or any(c.tags or c.asked_ep
                                                       for c in sweep.configs)):
        return {}
    named = sweep.workloads or {}
    return {
        "points": point_facts(sweep.configs),
        "axes": list(sweep.axis_names),
        "compare_baseline": dict(sweep.compare_baseline),
        "workloads": {n: json.loads(json.dumps(w.__dict__)) for n, w in named.items()},
        "concurrencies": list(dict.fromkeys(
            c for w in (named.values() or [sweep.workload]) for c in w.concurrency)),
    }


def points_from_ids(nodeids: list[str], ids: list[str]) -> dict[str, set[int]]:
    """The layouts and Cs of test ids (``test_x[<layout>]``, ``test_x[<layout>-c<C>]``, maybe
    with xdist's ``@<group>`` suffix): what an xdist worker collected."""
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
        if match := re.fullmatch(r"c(\d+)", param[len(cid) + 1 :]):
            conc.add(int(match[1]))
    return points


def selection_fields(
    sweep: Sweep,
    pool: tuple[Cluster, ...],
    ids: list[str],
    points: dict[str, set[int]],
    run_dir: Path,
    baseline_from: Path | None,
) -> tuple[dict[str, Any], list[str]]:
    """What run.json records about the selection (the layouts and Cs the results layer judges)
    and, when the baseline is not selected, which earlier run's baseline the deltas use
    (``--ppsweep-baseline-from``, else the newest matching run in the reports folder) or why
    there is none; with the progress lines that say so."""
    fields: dict[str, Any] = {
        "selected": {cid: sorted(points[cid]) for cid in ids if cid in points},
        "baseline_from": None,
        "baseline_note": "",
    }
    base = sweep.baseline
    if base in points:
        notes = [] if baseline_from is None else [
            f"--ppsweep-baseline-from {baseline_from.name}: not used, the baseline {base} runs "
            "in this run"
        ]
        return fields, notes
    found, note, notes = _earlier_baseline(sweep, pool, run_dir, baseline_from)
    if found is None:
        fields["baseline_note"] = note
        return fields, [*notes, note]
    fields["baseline_from"] = {
        "run_id": run_id(found), "path": str(found.resolve()), "chosen": note
    }
    return fields, [*notes, f"baseline {base} not in this run: deltas vs its rounds in run "
                            f"{run_id(found)} ({note})"]


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
