"""Aggregation details: manifest defaults, sweep order, steps across gaps, partial files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from support.runs import Point, config_row, rounds, write_run

from pytest_ppsweep.report.html import build_report
from pytest_ppsweep.results.aggregate import (
    RunMeta,
    load_run,
    summarize,
    summarize_run,
    write_summary,
)


def _run(tmp_path: Path, **meta: object) -> Path:
    rows = rounds(Point("a", 1, 8, 4, 8, 1000.0, 40.0, 42.0))
    rows += rounds(Point("b", 2, 4, 4, 8, 1500.0, 30.0, 31.0))
    rows += rounds(Point("c", 4, 2, 2, 8, 1800.0, 25.0, 26.0))
    rows += rounds(Point("a", 1, 8, 4, 16, 1000.0, 80.0, 82.0))
    rows += rounds(Point("c", 4, 2, 2, 16, 2000.0, 50.0, 52.0))  # b has no C=16 rounds
    configs = [config_row("c", 4, 2, 2, 2, 80_000), config_row("a", 1, 8, 4, 0, 80_000),
               config_row("b", 2, 4, 4, 1, 80_000)]
    return write_run(tmp_path / "run", rows, configs, **{"order": ["a", "b", "c"],
                                                         "baseline": "a", **meta})


def test_manifest_defaults(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run / "metadata" / "run.json").write_text(json.dumps({"unknown": 1}))
    meta = load_run(run).meta
    assert meta == RunMeta(run_id="run")
    assert (meta.spread_threshold, meta.min_repeats, meta.engine_version) == (0.02, 3, None)


def test_order_and_baseline_fall_back_to_configs_csv(tmp_path: Path) -> None:
    run = _run(tmp_path, order=[], baseline="")
    summary = summarize_run(load_run(run))
    assert summary.order == ("a", "b", "c")  # configs.csv "order" column
    assert summary.baseline == "a"
    assert summary.concurrencies == (8, 16)


def test_step_skips_a_layout_without_data(tmp_path: Path) -> None:
    table = summarize_run(load_run(_run(tmp_path))).table.set_index(["config_id", "concurrency"])
    assert table.loc[("c", 16), "step_from"] == "a"
    assert table.loc[("c", 16), "tps_step_pct"] == 100.0
    assert table.loc[("b", 8), "tps_vs_base_pct"] == 50.0
    assert table.loc[("c", 8), "ttft_p50_step_pct"] == (25.0 / 30.0 - 1) * 100
    assert list(table.index.get_level_values(0)) == ["a", "b", "c", "a", "c"]


def test_manifest_order_wins(tmp_path: Path) -> None:
    data = load_run(_run(tmp_path))
    summary = summarize(data.results, data.configs, baseline="c", order=["c", "b"])
    assert summary.order == ("c", "b", "a")
    table = summary.table.set_index(["config_id", "concurrency"])
    assert table.loc[("a", 8), "tps_vs_base_pct"] == (1000 / 1800 - 1) * 100


def test_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    run = _run(tmp_path)
    with (run / "results.csv").open("a") as handle:
        handle.write("synthetic,")  # a round being appended right now
    assert len(load_run(run).results) == 15


def test_summary_csv_and_empty_run(tmp_path: Path) -> None:
    run = _run(tmp_path)
    path = write_summary(run, summarize_run(load_run(run)))
    frame = pd.read_csv(path)
    assert len(frame) == 5 and "tps_spread_pct" in frame.columns
    assert not list(run.glob(".*.tmp"))
    empty = write_run(tmp_path / "empty", [], [config_row("a", 1, 8, 4, 0, 80_000,
                                                          boot_ok=False, boot_error="OOM")])
    assert build_report(empty).is_file()
    assert pd.read_csv(empty / "summary.csv").empty
