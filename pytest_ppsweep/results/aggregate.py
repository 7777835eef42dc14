"""Aggregate a run folder: medians per configuration x concurrency and the deltas around them.

Input is the run folder written by ``runstore`` (see docs/ARCHITECTURE.md): ``results.csv`` (one
row per round), ``configs.csv`` (one row per configuration) and ``metadata/run.json``. Nothing
here imports pytest, so the report can be rebuilt from the files alone.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.engine.engines import DEFAULT_ENGINE
from pytest_ppsweep.folder.runfolder import (
    COMPARISONS_CSV,
    CONFIGS_CSV,
    RESULTS_CSV,
    RUN_JSON,
    SELECTED,
    SUMMARY_CSV,
    FolderFiles,
    PointKey,
    RunJsonDict,
    RunKey,
    SourceKey,
    csv_rows,
    engine_facts,
)
from pytest_ppsweep.measure.completion import Shortfall, row_problems
from pytest_ppsweep.measure.energy import LABEL, SCHEMA_VERSION
from pytest_ppsweep.results import objective
from pytest_ppsweep.stats.spread import boot_spread_pct

if TYPE_CHECKING:
    from pytest_ppsweep.results.status import RunStatus

# Only what the tables and verdicts read is required; the other documented columns are optional
# so that a run written by an older or newer runstore still aggregates.
REQUIRED_RESULT_COLUMNS = (
    "config_id", "concurrency", "repeat", "num_requests", "completed", "failed",
    "input_tokens", "input_tokens_nominal", "input_tps", "ttft_p50_s", "ttft_p95_s",
)
OPTIONAL_RESULT_COLUMNS = ("pp", "tp", "ep", "ttft_p99_s", "e2e_p50_s", "simulated", "reused",
                           "energy_j_per_input_token", "energy_j_per_output_token",
                           "energy_j_per_total_token", "energy_j_per_request", "energy_method",
                           "energy_reasons")
# A point's energy figures: the median over its rounds whose energy is valid (an invalid round's
# cell is blank, measure/energy.py), blank where none is; beside them every round's reasons.
ENERGY_MEDIANS = ("energy_j_per_input_token", "energy_j_per_output_token",
                  "energy_j_per_total_token", "energy_j_per_request")
REQUIRED_CONFIG_COLUMNS = ("config_id",)
OPTIONAL_CONFIG_COLUMNS = (
    "pp", "tp", "ep", "order", "boot_ok", "boot_s", "boot_error", "topology_ok", "log_clean",
    "log_findings", "mem_peak_mib", "mem_total_mib", "mem_headroom_mib", "mem_worst_node",
    "mem_worst_gpu", "cluster", "kv_tokens", "kv_requests",
)
_MEDIAN_COLUMNS = ("input_tps", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "e2e_p50_s")


class RunFolderError(FileNotFoundError):
    """A run folder, or a file or column in it, is missing; the message names the path."""


@dataclass(frozen=True)
class RunMeta:
    """The run manifest ``metadata/run.json``; every key but ``run_id`` has a default."""

    run_id: str
    baseline: str = ""
    order: tuple[str, ...] = ()
    simulated: bool = False
    cluster: str = ""
    image: str = ""
    matrix: str = ""
    time_scale: float = 1.0
    engine: str = DEFAULT_ENGINE  # the serving engine (run.json engine; format ≤ 2: the default)
    engine_version: str | None = None
    spread_threshold: float = 0.02
    min_repeats: int = 3
    # "fail" (default): a spread above the threshold makes a point INVALID; "warn": a warning.
    spread_rule: str = "fail"
    concurrencies: tuple[int, ...] = ()
    # The layouts (and their Cs) that had tests in this run after -k/-m/--ppsweep-config, as
    # the plugin recorded them once collection finished; None: not recorded (every layout of
    # ``order`` was in the run).
    selected: dict[str, tuple[int, ...]] | None = None
    # Where the baseline's numbers come from when the baseline is not in this run: an earlier
    # run folder (its path and id), or a note saying why there is none.
    baseline_from: str = ""
    baseline_run: str = ""
    baseline_note: str = ""
    # The run's status as its folder says it now (results/livestatus.py; set by
    # results/pipeline.analyse): None for a folder written before the run status existed.
    status: RunStatus | None = None
    # pytest's arguments that made the run (results/commands.py starts from them); None: not
    # recorded (a folder written before run.json held them)
    args: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, raw: RunJsonDict, default_run_id: str) -> RunMeta:
        """Build from parsed JSON, ignoring unknown keys and tolerating missing ones."""
        engine, version = engine_facts(raw)
        workload = raw.get(RunKey.WORKLOAD)
        # The planned concurrencies: explicit, else the copied workload of the matrix.
        planned = raw.get(RunKey.CONCURRENCIES) or (
            workload.get("concurrency") if isinstance(workload, dict) else None)
        chosen = raw.get(SELECTED)
        source = raw.get(RunKey.BASELINE_FROM)
        source = source if isinstance(source, dict) else {}
        return cls(
            run_id=str(raw.get(RunKey.RUN_ID) or default_run_id),
            baseline=str(raw.get(RunKey.BASELINE) or ""),
            order=tuple(str(c) for c in raw.get(RunKey.ORDER) or ()),
            simulated=bool(raw.get(RunKey.SIMULATED, False)),
            cluster=str(raw.get(RunKey.CLUSTER) or ""),
            image=str(raw.get(RunKey.IMAGE) or ""),
            matrix=str(raw.get(RunKey.MATRIX) or ""),
            time_scale=float(raw.get(RunKey.TIME_SCALE) or 1.0),
            engine=engine,
            engine_version=version,
            spread_threshold=float(raw.get(RunKey.SPREAD_THRESHOLD, 0.02)),
            min_repeats=int(raw.get(RunKey.MIN_REPEATS, 3)),
            spread_rule="warn" if raw.get(RunKey.SPREAD_RULE) == "warn" else "fail",
            concurrencies=tuple(int(c) for c in planned or ()),
            selected=None if not isinstance(chosen, dict) else {
                str(k): tuple(int(c) for c in v or ()) for k, v in chosen.items()},
            baseline_from=str(source.get(SourceKey.PATH) or ""),
            baseline_run=str(source.get(SourceKey.RUN_ID) or ""),
            baseline_note=str(raw.get(RunKey.BASELINE_NOTE) or ""),
            args=tuple(str(a) for a in args) if isinstance(
                args := raw.get(RunKey.ARGS), list) else None,
        )

    def in_run(self, config_id: str) -> bool:
        """Whether ``config_id`` was selected in this run (True when not recorded)."""
        return self.selected is None or config_id in self.selected


@dataclass(frozen=True, eq=False)
class RunData:
    """Everything read from one run folder: each file once (``run_json``: metadata/run.json as
    read, for its readers beyond :class:`RunMeta`: the objectives, the decision rule, the axis
    points; none of them opens the file again)."""

    run_dir: Path
    meta: RunMeta
    results: pd.DataFrame
    configs: pd.DataFrame
    run_json: RunJsonDict = field(default_factory=dict)
    # The folder's other files the answers and views read (the SLO search's, comm, planner),
    # read once by results/pipeline.analyse; None until then.
    files: FolderFiles | None = None
    # results.csv's rows as written (strings), from the same read as ``results``; None when
    # the frame did not come from the folder
    result_rows: list[dict[str, str]] | None = None


@dataclass(frozen=True, eq=False)
class Summary:
    """Aggregated tables. ``table``: one row per configuration x C (sorted by C, then sweep
    order); ``configs``: one row per configuration (layout, boot time, worst-rank memory)."""

    table: pd.DataFrame
    configs: pd.DataFrame
    baseline: str
    order: tuple[str, ...]
    concurrencies: tuple[int, ...] = field(default=())
    # The deltas' baseline when it is not in this run: the earlier run it came from, and the
    # one line that says so (or, with ``no_deltas``, why there are no deltas).
    baseline_run: str = ""
    baseline_note: str = ""
    no_deltas: bool = False
    # Every comparison with the manifest fields its two points differ in and the confounded
    # mark (results/confound.py); None when not computed (a table built without a run folder).
    comparisons: pd.DataFrame | None = None
    # Each point's manifest (metadata/<point>.manifest.json, None: none), read once with the
    # comparisons; the answers' confounding caveats read them here.
    manifests: dict[str, dict[str, Any] | None] = field(default_factory=dict)


def _read_csv(path: Path, required: tuple[str, ...], optional: tuple[str, ...],
              text: str | None = None) -> pd.DataFrame:
    """The CSV at ``path`` as a frame (``text``: its contents as read already)."""
    if text is None and not path.is_file():
        raise RunFolderError(f"missing file: {path}")
    try:
        frame = pd.read_csv(path if text is None else io.StringIO(text),
                            dtype={"config_id": str, "run_id": str, "boot_error": str,
                                   "log_findings": str, "mem_worst_node": str, "cluster": str,
                                   "energy_method": str, "energy_reasons": str})
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame(columns=list(required))
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise RunFolderError(f"{path}: missing column(s) {', '.join(missing)}")
    for column in optional:
        if column not in frame.columns:
            frame[column] = np.nan
    # A round being appended while we read leaves a truncated last line; skip such rows.
    return frame.dropna(subset=["config_id"]).reset_index(drop=True)


def load_run(run_dir: Path) -> RunData:
    """Read results.csv, configs.csv and metadata/run.json of ``run_dir``.

    Raises RunFolderError naming the folder, file or column that is missing.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunFolderError(f"missing run folder: {run_dir}")
    path = run_dir / RESULTS_CSV
    if not path.is_file():
        raise RunFolderError(f"missing file: {path}")
    # read once: the frame for the aggregates, the rows as written for the views (FolderFiles)
    text = path.read_text(encoding="utf-8")
    rows = csv_rows(text)
    results = _read_csv(path, REQUIRED_RESULT_COLUMNS, OPTIONAL_RESULT_COLUMNS, text)
    results = results.dropna(subset=["concurrency"])
    results["concurrency"] = results["concurrency"].astype(int)
    configs = _read_csv(run_dir / CONFIGS_CSV, REQUIRED_CONFIG_COLUMNS, OPTIONAL_CONFIG_COLUMNS)
    meta_path = run_dir / RUN_JSON
    if not meta_path.is_file():
        raise RunFolderError(f"missing file: {meta_path}")
    try:
        raw = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{meta_path}: not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise RunFolderError(f"{meta_path}: expected a JSON object")
    return RunData(run_dir, RunMeta.from_dict(raw, run_dir.name), results, configs, raw,
                   result_rows=rows)


def round_problems(results: pd.DataFrame) -> list[list[Shortfall]]:
    """Per results.csv row (frame order), why its round does not count: the N/N rule of
    ``measure.completion``, row by row."""
    return [row_problems({str(k): v for k, v in r.items()}) for r in results.to_dict("records")]


def round_counts(results: pd.DataFrame) -> pd.Series:
    """Per results.csv row, whether its round counts (``measure.completion``'s N/N rule). The
    verdicts and the answers of one analysis share it: results/pipeline.analyse computes it
    once and hands it to both."""
    return pd.Series([not p for p in round_problems(results)], index=results.index, dtype=bool)


def layout_label(pp: Any, tp: Any, ep: Any, fallback: str, layout: str | None = None) -> str:
    """``"8 / 4 / 4"`` like the seed tables, or ``fallback`` when the sizes are unknown. A
    point of an axis sweep (``fallback`` is its id) keeps what tells it from the other points
    of its layout: ``pp8-tp4-ep4-a2a_deepep`` → ``"8 / 4 / 4 a2a_deepep"``. ``layout``: the
    point's layout as run.json records it; one of several server groups (not
    ``pp…-tp…-ep…``: ``p1-pp4tp4ep4-d2-tp8ep4``) is shown by its id, its pp/tp/ep columns
    being only its first group's."""
    try:
        sizes = f"{int(pp)} / {int(tp)} / {int(ep)}"
    except (TypeError, ValueError):
        return fallback
    prefix = f"pp{int(pp)}-tp{int(tp)}-ep{int(ep)}"
    if layout is not None and layout != prefix:
        return fallback
    variant = fallback.removeprefix(prefix)
    return f"{sizes} {variant[1:]}" if variant.startswith("-") and variant[1:] else sizes


def _sweep_order(order: list[str], results: pd.DataFrame, configs: pd.DataFrame) -> list[str]:
    seen = list(dict.fromkeys(order))
    # Configurations the manifest does not list still belong in the tables: after the listed
    # ones, in configs.csv order, then in first-seen result order.
    if "order" in configs.columns and configs["order"].notna().any():
        configs = configs.sort_values("order", kind="stable")
    for cid in [*configs["config_id"], *results["config_id"].unique()]:
        if cid not in seen:
            seen.append(str(cid))
    return seen


def _pct(value: pd.Series, reference: pd.Series) -> pd.Series:
    return (value / reference - 1.0) * 100.0


def _per_config(configs: pd.DataFrame, results: pd.DataFrame, order: list[str],
                layouts: Mapping[str, str]) -> pd.DataFrame:
    sizes = results.groupby("config_id", sort=False)[["pp", "tp", "ep"]].first()
    frame = configs.drop_duplicates("config_id", keep="last").set_index("config_id")
    frame = frame.reindex(order)
    for column in ("pp", "tp", "ep"):
        frame[column] = frame[column].fillna(sizes[column].reindex(order))
    headroom = frame["mem_total_mib"] - frame["mem_peak_mib"]
    frame["mem_headroom_mib"] = frame["mem_headroom_mib"].fillna(headroom)
    frame["layout"] = [layout_label(r.pp, r.tp, r.ep, str(i), layouts.get(str(i)))
                       for i, r in frame.iterrows()]
    frame = frame.reset_index().rename(columns={"index": "config_id"})
    keep = ["config_id", "layout", "pp", "tp", "ep", *OPTIONAL_CONFIG_COLUMNS[3:]]
    return frame[keep]


def energy_points(summary: Summary) -> dict[str, Any] | None:
    """answers.json's ``energy``: per point (layout x C) its medians of J per total, output and
    input token and per request over its rounds whose energy is valid (null where none is, with
    the reasons: never a number that is not one), the method, with the schema version and the
    label; None for a run without energy columns."""
    table = summary.table
    if "energy_j_per_total_token" not in table.columns:
        return None

    def value(v: Any) -> float | None:
        return None if v is None or pd.isna(v) else round(float(v), 6)

    points = []
    for r in table.to_dict("records"):
        figures = {c.removeprefix("energy_"): value(r.get(c)) for c in ENERGY_MEDIANS}
        reasons = [w for w in str(r.get("energy_reasons") or "").split(";") if w]
        points.append({"point": str(r["config_id"]), "concurrency": int(r["concurrency"]),
                       **figures, "method": str(r.get("energy_method") or "") or None,
                       "valid": figures["j_per_total_token"] is not None, "reasons": reasons})
    return {"schema_version": SCHEMA_VERSION, "label": LABEL, "points": points}


def _joined(values: pd.Series) -> str:
    """The distinct words of a point's rounds' cells (``a;b`` each), sorted, ``;``-joined."""
    words = {w for v in values.dropna() for w in str(v).split(";") if w}
    return ";".join(sorted(words))


def median_over_repeats(values: Sequence[Any]) -> float | None:
    """The median of one point's metric over its repeats, as :func:`summarize` takes it
    (pandas' median: missing values left out, the mean of the two middle ones for an even
    count); None when no repeat has a value."""
    median = pd.Series([v for v in values if v is not None], dtype=float).median()
    return None if pd.isna(median) else float(median)


def summarize(
    results: pd.DataFrame, configs: pd.DataFrame, *, baseline: str, order: list[str],
    reference: pd.DataFrame | None = None, spread_keep: int = 0,
    layouts: Mapping[str, str] | None = None,
) -> Summary:
    """Medians over repeats per configuration x C, spreads, deltas vs ``baseline`` and deltas
    between consecutive layouts of ``order`` (the previous layout with data at that C).

    ``reference``: the baseline's medians per C (indexed by concurrency) when they come from
    another run; by default they are the baseline's rows of this table. ``spread_keep``: the
    spread rule's rounds per point (stats/spread.py; 0: all). ``layouts``: each point's layout
    as run.json records it (:func:`layout_label`)."""
    full_order = _sweep_order(order, results, configs)
    baseline = baseline or (full_order[0] if full_order else "")
    per_config = _per_config(configs, results, full_order, layouts or {})
    grouped = results.groupby(["config_id", "concurrency"], sort=False)
    table = grouped[list(_MEDIAN_COLUMNS)].median()
    table["repeats"] = grouped["repeat"].nunique()
    # a round written with energy columns has a method or a reason (an older run: neither)
    if results[["energy_method", "energy_reasons"]].notna().to_numpy().any():
        for column in ENERGY_MEDIANS:
            table[column] = grouped[column].median()
        table["energy_method"] = grouped["energy_method"].agg(_joined)
        table["energy_reasons"] = grouped["energy_reasons"].agg(_joined)
    extremes = grouped[["input_tps", "ttft_p50_s"]].agg(["min", "max"])
    table["input_tps_min"] = extremes[("input_tps", "min")]
    table["input_tps_max"] = extremes[("input_tps", "max")]
    table["ttft_p50_min_s"] = extremes[("ttft_p50_s", "min")]
    table["ttft_p50_max_s"] = extremes[("ttft_p50_s", "max")]
    table = table.reset_index()
    rank = {cid: i for i, cid in enumerate(full_order)}
    table["_rank"] = table["config_id"].map(rank)
    table = table.sort_values(["concurrency", "_rank"], kind="stable").reset_index(drop=True)
    # The spread rule (stats/spread.py): the rounds nearest the median when there are extra.
    # A point of several boots: the largest spread within one of them (boot_spread_pct).
    boots = (results["boot"].astype(object).fillna("").astype(str) if "boot" in results.columns
             else pd.Series([""] * len(results), index=results.index))
    for column, name in (("input_tps", "tps_spread_pct"), ("ttft_p50_s", "ttft_p50_spread_pct")):
        spreads = {(str(k[0]), int(str(k[1]))): boot_spread_pct(
                       list(v), list(boots.loc[v.index]), spread_keep)
                   for k, v in results.groupby(["config_id", "concurrency"], sort=False)[column]}
        table[name] = [spreads.get((str(c), int(k)), np.nan)
                       for c, k in zip(table["config_id"], table["concurrency"], strict=True)]
    extra: dict[tuple[str, int], int] = {}
    if "extra" in results.columns:
        flag = results["extra"].astype(str).str.lower().isin(["true", "1"])
        counted = flag.groupby([results["config_id"], results["concurrency"]]).sum()
        extra = {(str(cid), int(str(conc))): int(v)
                 for (cid, conc), v in zip(counted.index, counted.to_numpy(), strict=True)}
    keys = zip(table["config_id"], table["concurrency"], strict=True)
    table["extra_repeats"] = [extra.get((str(c), int(k)), 0) for c, k in keys]
    base = (table[table["config_id"] == baseline].set_index("concurrency")
            if reference is None else reference)
    for column, name in (("input_tps", "tps_vs_base_pct"), ("ttft_p50_s", "ttft_p50_vs_base_pct"),
                         ("ttft_p95_s", "ttft_p95_vs_base_pct")):
        table[name] = _pct(table[column], table["concurrency"].map(base[column]))
    # Rows are sorted by C then sweep order, so the previous row of the same C is the step.
    previous = table.groupby("concurrency", sort=False)
    table["step_from"] = previous["config_id"].shift(1)
    table["tps_step_pct"] = _pct(table["input_tps"], previous["input_tps"].shift(1))
    table["ttft_p50_step_pct"] = _pct(table["ttft_p50_s"], previous["ttft_p50_s"].shift(1))
    info = per_config.set_index("config_id")
    table.insert(1, "layout", table["config_id"].map(info["layout"]))
    for position, column in enumerate(("pp", "tp", "ep"), start=2):
        table.insert(position, column, table["config_id"].map(info[column]))
    table = table.drop(columns="_rank")
    column_order = ["config_id", "layout", "pp", "tp", "ep", "concurrency", "repeats",
                    *_MEDIAN_COLUMNS]
    table = table[column_order + [c for c in table.columns if c not in column_order]]
    concurrencies = tuple(sorted(int(c) for c in table["concurrency"].unique()))
    return Summary(table, per_config, baseline, tuple(full_order), concurrencies)


def _present(data: RunData) -> set[str]:
    return {str(c) for c in (*data.results["config_id"], *data.configs["config_id"])}


def _earlier_reference(data: RunData, baseline: str) -> tuple[pd.DataFrame | None, str, str]:
    """The baseline's medians per C from the earlier run named in run.json, its run id, and
    the line that says where they come from (or why there are none)."""
    meta = data.meta
    if not meta.baseline_from and not meta.baseline_run:
        return None, "", meta.baseline_note or (
            f"baseline {baseline} is not in this run and no earlier run was chosen: no deltas")
    tried = [Path(meta.baseline_from)] if meta.baseline_from else []
    if meta.baseline_run:  # the folder moved with its reports folder
        tried.append(data.run_dir.parent / meta.baseline_run)
    for folder in tried:
        try:
            ref = load_run(folder)
        except RunFolderError:
            continue
        rows = ref.results[ref.results["config_id"] == baseline]
        if rows.empty:
            return None, "", (f"baseline {baseline}: run {ref.meta.run_id} has no rounds of it: "
                              "no deltas")
        own = ref.configs[ref.configs["config_id"] == baseline]
        table = summarize(rows, own, baseline=baseline, order=[baseline]).table
        return (table.set_index("concurrency"), ref.meta.run_id,
                f"baseline {baseline} from run {ref.meta.run_id} "
                "(manifest identical except layout)")
    where = ", ".join(str(t) for t in tried)
    return None, "", f"baseline {baseline}: earlier run not found at {where}: no deltas"


def summarize_run(data: RunData, *, comparisons: bool = True) -> Summary:
    """:func:`summarize` with the baseline, order and concurrencies of the run manifest.

    Layouts the run did not select (``-k``, ``--ppsweep-config``) and that left nothing in
    the run folder are not in the summary. When the baseline is one of them, the deltas are
    against its rounds in the earlier run that run.json names (``baseline_from``); without one
    there are no deltas and ``baseline_note`` says why. ``comparisons=False``: without
    :func:`with_comparisons` (a verdict needs neither the comparisons nor their columns)."""
    meta = data.meta
    present = _present(data)
    order = [c for c in meta.order if meta.in_run(c) or c in present]
    baseline = meta.baseline or (order[0] if order else "")
    reference, source, note = None, "", ""
    if baseline and not meta.in_run(baseline) and baseline not in present:
        reference, source, note = _earlier_reference(data, baseline)
    points = data.run_json.get(RunKey.POINTS)
    layouts = {str(cid): str(p[PointKey.RUNS]) for cid, p in points.items()
               if isinstance(p, dict) and p.get(PointKey.RUNS)} if isinstance(points, dict) else {}
    summary = summarize(data.results, data.configs, baseline=baseline, order=order,
                        reference=reference, spread_keep=meta.min_repeats, layouts=layouts)
    planned = meta.concurrencies
    if meta.selected is not None:  # only the Cs of the tests that were selected
        chosen = {c for cs in meta.selected.values() for c in cs}
        planned = tuple(c for c in planned if c in chosen)
    merged = tuple(sorted({*summary.concurrencies, *planned}))
    summary.table["baseline_from"] = (meta.run_id if not note else source) or np.nan
    summary = replace(summary, concurrencies=merged, baseline_run=source, baseline_note=note,
                      no_deltas=bool(note) and reference is None)
    return with_comparisons(data, summary) if comparisons else summary


def with_comparisons(data: RunData, summary: Summary) -> Summary:
    """``summary`` with its comparisons (results/confound.py) and, in its table, the fields
    each delta's two points differ in: ``vs_base_differs``/``step_differs`` and whether that
    delta is confounded (``vs_base_confounded``/``step_confounded``, the extra fields in
    ``*_extra``). Decode metrics' medians are added to the table when results.csv has them."""
    from pytest_ppsweep.results import confound

    manifests = {cid: manifest.load(data.run_dir, cid) for cid in summary.order}
    frame = confound.comparisons(data.run_dir, data.run_json, summary.table, data.results,
                                 baseline=summary.baseline, order=summary.order,
                                 manifests=manifests)
    table = summary.table
    for kind, prefix in (("baseline", "vs_base"), ("step", "step")):
        part = frame[frame["kind"] == kind] if not frame.empty else frame
        index = {(r["config_id"], int(r["concurrency"])): r for r in part.to_dict("records")}
        keys = list(zip(table["config_id"], table["concurrency"].astype(int), strict=True))
        table[f"{prefix}_differs"] = [index[k]["differs"] if k in index else "" for k in keys]
        table[f"{prefix}_extra"] = [index[k]["extra"] if k in index else "" for k in keys]
        table[f"{prefix}_confounded"] = [bool(index[k]["confounded"]) if k in index else False
                                         for k in keys]
    if confound.points_of(data.run_json):
        # Points with axes or workloads: every delta within one workload and one set of axis
        # values (never pp8-…-a2a_flashinfer → pp4-tp8-ep4).
        _per_workload_deltas(table, frame)
    medians = confound.median_metrics(data.results)
    for metric in confound.DECODE_METRICS:
        if metric in medians.columns and metric not in table.columns:
            keys = list(zip(table["config_id"], table["concurrency"].astype(int), strict=True))
            table[metric] = [medians[metric].get(k, np.nan) for k in keys]
    _references(data.run_json, summary, table, frame)
    return replace(summary, table=table, comparisons=frame, manifests=manifests)


# Deltas against the row's reference beyond those summarize computes for prefill: a decode
# workload's (its objective, results/objective.py, and ITL p50).
DECODE_DELTAS = (("output_tps", "output_tps_vs_base_pct"), ("tpot_p50_s", "tpot_p50_vs_base_pct"),
                 ("itl_p50_s", "itl_p50_vs_base_pct"))


def _references(raw: RunJsonDict, summary: Summary, table: pd.DataFrame,
                frame: pd.DataFrame) -> None:
    """What each row of ``table`` is and is compared with: ``workload`` (its name, "" for a
    sweep's one workload), ``objective`` (its workload's ranking metrics, space-separated),
    ``vs_base_of`` (the point its vs-baseline deltas are measured against: the comparisons'
    reference, the row's own point when it is a reference, "" for none) and the decode
    deltas (:data:`DECODE_DELTAS`) against that point; ``raw``: the run's run.json."""
    workload_of = objective.point_workloads(raw)
    objectives = objective.workload_objectives(raw)
    table["workload"] = [workload_of.get(str(c), "") for c in table["config_id"]]
    table["objective"] = [" ".join(objectives.get(w, objectives[""])) for w in table["workload"]]
    part = frame[frame["kind"] == "baseline"] if not frame.empty else frame
    given = {(str(r["config_id"]), int(r["concurrency"])): str(r["reference"])
             for r in part.to_dict("records")}
    references = set(given.values())
    if not summary.no_deltas and not summary.baseline_run:
        references.add(summary.baseline)
    keys = list(zip(table["config_id"].astype(str), table["concurrency"].astype(int),
                    strict=True))
    base_of = []
    for cid, conc in keys:
        if summary.no_deltas:
            base_of.append("")
        elif (cid, conc) in given:
            base_of.append(given[(cid, conc)])
        elif cid in references:
            base_of.append(cid)
        elif summary.baseline_run:
            base_of.append(f"{summary.baseline} of run {summary.baseline_run}")
        else:
            base_of.append("")
    table["vs_base_of"] = base_of
    value = {(k, col): r.get(col) for k, r in zip(keys, table.to_dict("records"), strict=True)
             for col, _ in DECODE_DELTAS}
    for column, name in DECODE_DELTAS:
        if column not in table.columns:
            continue
        out = []
        for (cid, conc), ref in zip(keys, base_of, strict=True):
            try:
                mine, theirs = float(value[((cid, conc), column)]), float(  # type: ignore[arg-type]
                    value[((ref, conc), column)])  # type: ignore[arg-type]
                out.append((mine / theirs - 1.0) * 100.0)
            except (KeyError, TypeError, ValueError, ZeroDivisionError):
                out.append(np.nan)
        table[name] = out


def _per_workload_deltas(table: pd.DataFrame, frame: pd.DataFrame) -> None:
    """Several workloads: the vs-baseline and step deltas of ``table`` are taken within each
    point's workload (the baseline layout and the previous layout of the same workload and
    axis values, results/confound.py), never across workloads."""
    keys = list(zip(table["config_id"], table["concurrency"].astype(int), strict=True))
    value = {(k, col): v for k, r in zip(keys, table.to_dict("records"), strict=True)
             for col, v in r.items()}

    def refs(kind: str) -> dict[tuple[str, int], str]:
        part = frame[frame["kind"] == kind] if not frame.empty else frame
        return {(str(r["config_id"]), int(r["concurrency"])): str(r["reference"])
                for r in part.to_dict("records")}

    def pct(key: tuple[str, int], ref: str | None, column: str) -> float:
        if ref is None:
            return float("nan")
        mine, theirs = value.get((key, column)), value.get(((ref, key[1]), column))
        try:
            return (float(mine) / float(theirs) - 1.0) * 100.0  # type: ignore[arg-type]
        except (TypeError, ValueError, ZeroDivisionError):
            return float("nan")

    base, step = refs("baseline"), refs("step")
    for column, name in (("input_tps", "tps_vs_base_pct"), ("ttft_p50_s", "ttft_p50_vs_base_pct"),
                         ("ttft_p95_s", "ttft_p95_vs_base_pct")):
        table[name] = [pct(k, base.get(k), column) for k in keys]
    table["step_from"] = [step.get(k, np.nan) for k in keys]
    table["tps_step_pct"] = [pct(k, step.get(k), "input_tps") for k in keys]
    table["ttft_p50_step_pct"] = [pct(k, step.get(k), "ttft_p50_s") for k in keys]


def _atomic_csv(frame: pd.DataFrame, path: Path) -> Path:
    # Write then rename, so a reader (or a crash) never sees half a file.
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_csv(tmp, index=False, float_format="%.4f")
    os.replace(tmp, path)
    return path


def write_summary(run_dir: Path, summary: Summary) -> Path:
    """Write ``<run_dir>/summary.csv`` (one row per configuration x C) atomically, and
    ``comparisons.csv`` when the comparisons were computed."""
    if summary.comparisons is not None:
        _atomic_csv(summary.comparisons, Path(run_dir) / COMPARISONS_CSV)
    return _atomic_csv(summary.table, Path(run_dir) / SUMMARY_CSV)


def compare_runs(a: Summary, b: Summary) -> pd.DataFrame:
    """Side-by-side medians of two runs per configuration x C with deltas of b vs a in %."""
    columns = ["config_id", "concurrency", "input_tps", "ttft_p50_s", "ttft_p95_s"]
    merged = a.table[columns].merge(b.table[columns], on=["config_id", "concurrency"],
                                    how="outer", suffixes=("_a", "_b"), sort=False)
    for metric, name in (("input_tps", "tps"), ("ttft_p50_s", "ttft_p50"),
                         ("ttft_p95_s", "ttft_p95")):
        merged[f"{name}_delta_pct"] = _pct(merged[f"{metric}_b"], merged[f"{metric}_a"])
    rank = {cid: i for i, cid in enumerate(dict.fromkeys([*b.order, *a.order]))}
    merged["_rank"] = merged["config_id"].map(lambda c: rank.get(c, len(rank)))
    merged = merged.sort_values(["concurrency", "_rank"], kind="stable")
    return merged.drop(columns="_rank").reset_index(drop=True)


def write_compare(path: Path, frame: pd.DataFrame) -> Path:
    """Write a :func:`compare_runs` table to ``path`` atomically."""
    return _atomic_csv(frame, Path(path))
