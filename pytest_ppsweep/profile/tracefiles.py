"""The profile's files in the run folder.

    profile/<layout>/*.trace.json.gz   every rank's trace, as its node wrote it
    profile/<layout>/attribution.json  the layout's attribution (medians of the stable ranks,
                                       and every rank's own numbers)
    profile.csv                        the §9.3 table: one row per layout × kind, deltas vs the
                                       baseline layout (rewritten after each profiled layout)
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ppsweep.folder.runfolder import ATTRIBUTION_JSON, PROFILE_CSV, PROFILE_DIR, RunFolder

from .attribution import LayoutProfile, table_rows

CSV_NAME = PROFILE_CSV
COLUMNS = ("config_id", "kind", "calls", "cumulative_ms", "p50_ms", "overlap_ratio",
           "exposed_share", "compute_share", "idle_share", "window_ms", "ranks", "stable_ranks",
           "calls_delta", "cumulative_delta", "p50_delta", "baseline")


def layout_dir(run_dir: Path, config_id: str) -> Path:
    return run_dir / PROFILE_DIR / config_id


def write_layout(run_dir: Path, lp: LayoutProfile) -> Path:
    path = layout_dir(run_dir, lp.config_id) / ATTRIBUTION_JSON
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(lp.as_dict(), indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_layouts(run_dir: Path, order: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Every profiled layout's attribution.json, in ``order`` first, then by name (a file
    half-written by a crashed run is left out: the layout's test failed and said so)."""
    return in_order(RunFolder(run_dir).attributions(), order)


def in_order(layouts: Mapping[str, dict[str, Any]], order: Sequence[str] = ()
             ) -> dict[str, dict[str, Any]]:
    """``layouts`` (per layout, its attribution.json) in ``order`` first, then by name."""
    rank = {cid: i for i, cid in enumerate(order)}
    return dict(sorted(layouts.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def write_table(run_dir: Path, baseline: str, order: Sequence[str] = ()) -> list[dict[str, Any]]:
    """profile.csv from every attribution.json of the run folder."""
    rows = table_rows(load_layouts(run_dir, order), baseline)
    path = run_dir / CSV_NAME
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # xdist workers may write at once
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for row in rows:
            w.writerow({k: "" if row[k] is None else row[k] for k in COLUMNS})
    os.replace(tmp, path)
    return rows
