"""Comparisons that say whether they are single-variable: every delta lists the fields in which
its two points differ, taken from their manifests, and is **confounded** when they differ in
more than the axis under study.

Three kinds of comparison per workload and C (``comparisons.csv``, the report, the terminal):

- ``baseline``: a point vs the sweep's baseline layout with the same axis values and workload;
- ``step``: a point vs the previous layout of the sweep with the same axis values and workload
  (the seeds' step-to-step table);
- ``axis <name>``: a point vs its comparison group's baseline: the same layout as written, the
  same workload and other axis values, and the axis at ``[compare] baseline``'s value (else the
  axis's default), e.g. "same layout, ``moe_a2a_backend = none``".

What a comparison studies: for a layout comparison the layout (PP, and TP with it, since
PP × TP is the cluster's GPUs); for an axis comparison that axis's field (``server.<flag>``,
``env.<VAR>``, ``layout.ep``). Every other differing manifest field (EP, a layout's own flags,
image, workload, env) is an extra field and makes the comparison confounded. On the seeds'
sweep this flags PP8 → PP16 by itself: EP 4 → 2 and PP16's own flags (seeds §7).

Metrics per workload: each comparison carries the medians the workload has (prefill: Input TPS
and TTFT; decode: TPOT, ITL, output TPS and E2E as well, once results.csv has them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import DEFAULT_ENGINE, ENGINES, engine_of
from pytest_ppsweep.folder.runfolder import COMPARISONS_CSV, PointKey, RunJsonDict, RunKey

__all__ = [
    "COMPARISON_COLUMNS",
    "DECODE_METRICS",
    "DEPLOYMENT_STUDY",
    "LAYOUT_STUDY",
    "PREFILL_METRICS",
    "axis_table",
    "comparisons",
    "confounded_lines",
    "differing",
    "extra_fields",
    "median_metrics",
    "points_of",
    "write_comparisons",
]

PREFILL_METRICS = ("input_tps", "ttft_p50_s")
# SGLang bench_serving's decode metrics (measure/metrics.py, ROW_KEYS), read when present.
DECODE_METRICS = ("output_tps", "tpot_mean_s", "tpot_p50_s", "tpot_p99_s", "itl_mean_s",
                  "itl_p50_s", "itl_p99_s", "e2e_mean_s", "e2e_p50_s", "e2e_p99_s")
HIGHER_IS_BETTER = ("input_tps", "output_tps")
LAYOUT_STUDY = ("layout.pp", "layout.tp")
# A layout comparison where either point is a layout of several server groups (P/D) studies
# the deployment: its groups, their shapes and EP, and where every rank runs (each node's host,
# command and environment follow from the groups' placement).
DEPLOYMENT_STUDY = ("deployment", "layout.pp", "layout.tp", "layout.ep")
COMPARISON_COLUMNS = ("kind", "workload", "concurrency", "config_id", "reference", "studied",
                      "differs", "extra", "confounded")
# Manifest fields that always differ between two points and say nothing of their own.
_IDENTITY = ("config_id",)


def points_of(raw: RunJsonDict) -> dict[str, dict[str, Any]]:
    """run.json ``points`` (folder/runfolder.point_facts) of ``raw``, the run's run.json as read
    once (results/aggregate.RunData.run_json), ``{}`` for a sweep without axes."""
    points = raw.get(RunKey.POINTS)
    return {str(k): v for k, v in points.items() if isinstance(v, dict)} if isinstance(
        points, dict) else {}


def differing(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[str]:
    """The manifest differences of two points (``layout.ep: 4 → 2``), the id left out; [] when
    a manifest is missing."""
    if a is None or b is None:
        return []
    lines = manifest.differences(dict(a), dict(b))
    return [line for line in lines if line.split(": ", 1)[0] not in _IDENTITY]


def extra_fields(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None,
                 studied: Sequence[str] = LAYOUT_STUDY) -> list[str]:
    """The manifest fields two points differ in beyond ``studied`` (and its node-level echoes):
    non-empty means a comparison of them is confounded."""
    fields = list(dict.fromkeys(_field(d) for d in differing(a, b)))
    engine = _engine(a, b)
    studied = _studied(studied, a, b)
    return [f for f in fields if f not in studied and not _implied(f, studied, engine)]


def _studied(studied: Sequence[str], *manifests: Mapping[str, Any] | None) -> Sequence[str]:
    """What a comparison studies: a layout comparison where either point is a layout of
    several server groups studies the deployment (:data:`DEPLOYMENT_STUDY`)."""
    if tuple(studied) == LAYOUT_STUDY and any((m or {}).get("deployment") for m in manifests):
        return DEPLOYMENT_STUDY
    return studied


def _field(line: str) -> str:
    return line.split(": ", 1)[0]


def _facts(cid: str, row: Mapping[str, Any], points: Mapping[str, dict[str, Any]]) -> dict[
        str, Any]:
    known = points.get(cid)
    if known:
        return known
    try:
        layout = f"pp{int(row['pp'])}-tp{int(row['tp'])}-ep{int(row['ep'])}"
    except (KeyError, TypeError, ValueError):
        layout = cid
    return {PointKey.LAYOUT: layout, PointKey.AXES: {}, PointKey.WORKLOAD: "", PointKey.TAGS: []}


def _axis_field(name: str, manifests: Sequence[Mapping[str, Any] | None]) -> str:
    if name in ("pp", "tp", "ep"):
        return f"layout.{name}"
    for m in manifests:
        if m and name in (m.get("env") or {}) and name not in (m.get("server") or {}):
            return f"env.{name}"
    return f"server.{name}"


def median_metrics(results: pd.DataFrame) -> pd.DataFrame:
    """Medians over valid-or-not repeats per point × C of every metric results.csv has
    (prefill and decode), indexed by (config_id, concurrency)."""
    present = [m for m in (*PREFILL_METRICS, *DECODE_METRICS)
               if m in results.columns and results[m].notna().any()]
    if results.empty or not present:
        return pd.DataFrame(columns=present)
    frame = results.copy()
    for m in present:
        frame[m] = pd.to_numeric(frame[m], errors="coerce")
    return frame.groupby(["config_id", "concurrency"], sort=False)[present].median()


def comparisons(run_dir: Path, raw: RunJsonDict, table: pd.DataFrame,
                results: pd.DataFrame | None = None, baseline: str = "",
                order: Sequence[str] = (),
                manifests: Mapping[str, dict[str, Any] | None] | None = None) -> pd.DataFrame:
    """Every comparison of the run (module docstring), one row per point × C × kind, with its
    deltas in % per metric the workload has, the differing fields and the confounded mark.
    ``raw``: the run's run.json as read once; ``manifests``: the points' manifests as read
    already (results/aggregate.Summary.manifests), else read here from ``run_dir``."""
    run_dir = Path(run_dir)
    points = points_of(raw)
    axes = [str(a) for a in raw.get(RunKey.AXES) or []]
    given = raw.get(RunKey.COMPARE_BASELINE)
    chosen: dict[str, Any] = given if isinstance(given, dict) else {}
    baseline = baseline or str(raw.get(RunKey.BASELINE) or "")
    ids = list(dict.fromkeys([*order, *table["config_id"].astype(str)])) if not table.empty else []
    medians = median_metrics(results) if results is not None else pd.DataFrame()
    if manifests is None:
        manifests = {cid: manifest.load(run_dir, cid) for cid in ids}
    rows_by_id: dict[str, dict[str, Any]] = {
        str(r["config_id"]): {str(k): v for k, v in r.items()} for r in table.to_dict("records")}
    facts = {cid: _facts(cid, rows_by_id.get(cid) or {}, points) for cid in ids}
    defaults = {a: chosen.get(a, _default(a, facts)) for a in axes}
    out: list[dict[str, Any]] = []
    concs = sorted({int(c) for c in table["concurrency"].unique()}) if not table.empty else []
    have = {(str(r["config_id"]), int(r["concurrency"])) for r in table.to_dict("records")}

    def key_without(cid: str, skip: str) -> tuple[Any, ...]:
        f = facts[cid]
        ax = f.get(PointKey.AXES) or {}
        return (f.get(PointKey.WORKLOAD, ""), f.get(PointKey.LAYOUT) if skip != "layout" else None,
                *(json.dumps(ax.get(a), sort_keys=True) for a in axes if a != skip))

    base_key = {cid: key_without(cid, "layout") for cid in ids}
    for c in concs:
        present = [cid for cid in ids if (cid, c) in have]
        # layout comparisons: same workload and axis values
        for i, cid in enumerate(present):
            same = [p for p in present if base_key[p] == base_key[cid]]
            at = same.index(cid)
            ref_base = _baseline_of(baseline, same, facts)
            if ref_base and ref_base != cid:
                out.append(_row("baseline", cid, ref_base, c, facts, manifests, medians,
                                LAYOUT_STUDY))
            if at > 0:
                out.append(_row("step", cid, same[at - 1], c, facts, manifests, medians,
                                LAYOUT_STUDY))
            del i
        for a in axes:
            if a in ("pp", "tp"):
                continue
            want = json.dumps(defaults[a], sort_keys=True)
            for cid in present:
                mine = json.dumps((facts[cid].get(PointKey.AXES) or {}).get(a), sort_keys=True)
                if mine == want:
                    continue
                ref = next((p for p in present if key_without(p, a) == key_without(cid, a)
                            and json.dumps((facts[p].get(PointKey.AXES) or {}).get(a),
                                           sort_keys=True) == want), None)
                if ref is None:
                    continue
                field = _axis_field(a, [manifests.get(cid), manifests.get(ref)])
                out.append(_row(f"axis {a}", cid, ref, c, facts, manifests, medians, (field,)))
    frame = pd.DataFrame(out)
    if frame.empty:
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    lead = [c for c in COMPARISON_COLUMNS if c in frame.columns]
    return frame[lead + [c for c in frame.columns if c not in lead]]


def _default(axis: str, facts: Mapping[str, dict[str, Any]]) -> Any:
    """An axis's default: the value of the points without an id part for it (first seen)."""
    for f in facts.values():
        if f.get(PointKey.AXES) and axis in f[PointKey.AXES] and not f.get(PointKey.TAGS):
            return f[PointKey.AXES][axis]
    for f in facts.values():
        if f.get(PointKey.AXES) and axis in f[PointKey.AXES]:
            return f[PointKey.AXES][axis]
    return None


def _baseline_of(baseline: str, same: Sequence[str], facts: Mapping[str, dict[str, Any]]) -> (
        str | None):
    """The sweep baseline's layout among points of one group (same workload and axes)."""
    if not same:
        return None
    if baseline in same:
        return baseline
    layout = facts.get(baseline, {}).get(PointKey.LAYOUT) if baseline in facts else None
    if layout is None:
        layout = baseline.split("-")[:3] and "-".join(baseline.split("-")[:3])
    return next((p for p in same if facts[p].get(PointKey.LAYOUT) == layout), None)


def _row(kind: str, cid: str, ref: str, conc: int, facts: Mapping[str, dict[str, Any]],
         manifests: Mapping[str, Any], medians: pd.DataFrame, studied: Sequence[str]) -> dict[
             str, Any]:
    diff = differing(manifests.get(ref), manifests.get(cid))
    fields = list(dict.fromkeys(_field(d) for d in diff))
    engine = _engine(manifests.get(ref), manifests.get(cid))
    studied = _studied(studied, manifests.get(ref), manifests.get(cid))
    extra = [f for f in fields if f not in studied and not _implied(f, studied, engine)]
    row: dict[str, Any] = {
        "kind": kind, "workload": facts[cid].get(PointKey.WORKLOAD, ""), "concurrency": conc,
        "config_id": cid, "reference": ref, "studied": ", ".join(studied),
        "differs": "; ".join(diff), "extra": ", ".join(extra), "confounded": bool(extra),
    }
    for metric in medians.columns:
        try:
            mine = _float(medians.at[(cid, conc), metric])
            theirs = _float(medians.at[(ref, conc), metric])
        except KeyError:
            continue
        value = (mine / theirs - 1.0) * 100.0 if theirs and not np.isnan(
            theirs) and not np.isnan(mine) else np.nan
        row[metric] = mine
        row[f"{metric}_ref"] = theirs
        row[f"{metric}_delta_pct"] = value
    return row


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _engine(*manifests: Mapping[str, Any] | None) -> Engine:
    """The engine the manifests' points ran (the default engine's when unknown)."""
    name = next((str(m["engine"]) for m in manifests if m and m.get("engine")), DEFAULT_ENGINE)
    return ENGINES.get(name) or engine_of()


def _implied(field: str, studied: Sequence[str], engine: Engine | None = None) -> bool:
    """A node-level echo of a studied field in the engine's command line (for SGLang
    ``nodes.argv.--tp-size`` with ``layout.tp``, ``nodes.argv.--chunked-prefill-size`` with
    ``server.chunked_prefill_size``), or in the environment."""
    engine = engine or engine_of()
    if "deployment" in studied and (field.startswith("node") or field.startswith("deployment")):
        return True  # a rank's host, command or environment, or a group's, under a new placement
    for s in studied:
        name = s.split(".", 1)[-1]
        flag = engine.layout_flag(name) if s.startswith("layout.") else engine.flag_of(name)
        if field.endswith(f"argv.{flag}") or field.endswith(f"env.{name}"):
            return True
    return False


def confounded_lines(frame: pd.DataFrame) -> list[str]:
    """One line per confounded comparison (first C only), as the terminal and report say it."""
    if frame.empty or "confounded" not in frame.columns:
        return []
    lines, seen = [], set()
    for r in frame[frame["confounded"].astype(bool)].to_dict("records"):
        key = (r["kind"], r["config_id"], r["reference"])
        if key in seen:
            continue
        seen.add(key)
        lines.append(f"CONFOUNDED {r['reference']} → {r['config_id']} ({r['kind']}): studies "
                     f"{r['studied']} but also differs in {r['extra']}")
    return lines


def axis_table(table: pd.DataFrame, configs: pd.DataFrame,
               raw: RunJsonDict) -> list[dict[str, Any]]:
    """The report's axis sweep: per workload and axis, rows grouped by layout with one column
    per axis value (the workload's headline metric per C) and the worst rank's memory headroom
    per variant. A list of ``{"workload", "axis", "values", "rows"}``; rows are
    ``{"layout", "cells": {value: {"config_id", "metrics": {C: {...}}, "headroom_mib"}}}``;
    ``raw``: the run's run.json as read once (its ``points`` and ``axes``)."""
    points = points_of(raw)
    axes = [str(a) for a in raw.get(RunKey.AXES) or []]
    if not points or not axes:
        return []
    headroom, failed = {}, {}
    if not configs.empty and "mem_headroom_mib" in configs.columns:
        headroom = {str(r["config_id"]): r.get("mem_headroom_mib")
                    for r in configs.to_dict("records")}
    if not configs.empty and "boot_error" in configs.columns:
        failed = {str(r["config_id"]): str(r["boot_error"]) for r in configs.to_dict("records")
                  if isinstance(r.get("boot_error"), str) and r["boot_error"]}
    rows_by = {(str(r["config_id"]), int(r["concurrency"])): r for r in table.to_dict("records")}
    out = []
    workloads = list(dict.fromkeys(str(p.get(PointKey.WORKLOAD, "")) for p in points.values()))
    for w in workloads:
        for a in axes:
            if a in ("pp", "tp"):
                continue
            values = list(dict.fromkeys(json.dumps((p.get(PointKey.AXES) or {}).get(a))
                                        for p in points.values()
                                        if p.get(PointKey.WORKLOAD, "") == w))
            groups: dict[str, dict[str, Any]] = {}
            for cid, p in points.items():
                if p.get(PointKey.WORKLOAD, "") != w:
                    continue
                value = json.dumps((p.get(PointKey.AXES) or {}).get(a))
                others = {k: v for k, v in (p.get(PointKey.AXES) or {}).items() if k != a}
                label = p.get(PointKey.LAYOUT, cid) + "".join(
                    f" {k}={v}" for k, v in others.items() if k not in ("pp", "tp", "ep"))
                cell = {"config_id": cid, "runs": p.get(PointKey.RUNS, ""),
                        "headroom_mib": headroom.get(cid), "boot_error": failed.get(cid, ""),
                        "metrics": {}}
                for (rid, c), r in rows_by.items():
                    if rid == cid:
                        cell["metrics"][c] = r
                groups.setdefault(label, {})[value] = cell
            out.append({"workload": w, "axis": a, "values": values,
                        "rows": [{"layout": k, "cells": v} for k, v in groups.items()]})
    return out


def write_comparisons(run_dir: Path, frame: pd.DataFrame) -> Path:
    """``<run_dir>/comparisons.csv``: every comparison with its differing fields."""
    path = Path(run_dir) / COMPARISONS_CSV
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_csv(tmp, index=False, float_format="%.4f")
    tmp.replace(path)
    return path
