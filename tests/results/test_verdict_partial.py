"""A partial run (-k pp8, --ppsweep-config): layouts it did not select are not judged, and the
deltas use the baseline of the newest earlier run whose baseline manifest matches."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from support.paths import SEED
from support.runs import SEED_LAYOUTS, config_row, rounds, seed_points, seed_run, write_run

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.gate import compare, parse_thresholds, regressions
from pytest_ppsweep.matrix.model import Sweep
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.report.html import html_summary
from pytest_ppsweep.report.terminal import terminal_summary
from pytest_ppsweep.results.pipeline import analyse
from pytest_ppsweep.run.close import summarize

PP1, PP4, PP8 = "pp1-tp32-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4"
NO_RUN = (f"baseline {PP1} is not in this run and no earlier run in reports has a matching "
          "one: no deltas")


def _partial(folder: Path, selected: dict[str, list[int]], configs: list[dict[str, Any]] | None
             = None, **meta: Any) -> Path:
    """A run of the seed sweep in which only ``selected`` layouts had tests (PP8 measured)."""
    rows = [r for p in seed_points([PP8]) for r in rounds(p, run_id=folder.name)]
    configs = configs or [config_row(PP8, 8, 4, 4, 3, 79_407)]
    return write_run(folder, rows, configs, baseline=PP1, order=list(SEED_LAYOUTS),
                     concurrencies=[8, 16], selected=selected, **meta)


def _lines(run: Path) -> list[str]:
    _, summary, verdicts, rec = analyse(run)
    return terminal_summary(summary, verdicts, rec, width=100)


def test_deselected_layouts_are_not_judged_and_no_run_means_no_deltas(tmp_path: Path) -> None:
    run = _partial(tmp_path / "partial", {PP8: [8, 16]}, baseline_note=NO_RUN)
    data, summary, verdicts, rec = analyse(run)
    assert {v.config_id for v in verdicts} == {PP8} and all(v.valid for v in verdicts)
    assert summary.order == (PP8,) and summary.no_deltas
    lines = terminal_summary(summary, verdicts, rec, width=100)
    text = "\n".join(lines)
    assert "INVALID" not in text and "n/a" not in text and "Not eligible" not in text
    assert "ΔTPS" not in text and "ΔTTFT" not in text
    assert [line for line in lines if "no deltas" in line] == [NO_RUN]  # one line
    assert "8 / 4 / 4" in text and "8,809.50" in text
    page = "\n".join(html_summary(data, summary, verdicts, rec))
    assert "vs base" not in page and f"Medians over repeats; {NO_RUN}" in page
    verdicts_section = page.split("<h3>Verdicts")[1].split("<h3>")[0]
    assert "Verdicts (2/2 valid)" in page and PP1 not in verdicts_section
    summarize(run)
    table = pd.read_csv(run / "summary.csv")
    assert table["baseline_from"].isna().all() and table["tps_vs_base_pct"].isna().all()


def test_a_selected_layout_that_failed_to_boot_is_still_judged(tmp_path: Path) -> None:
    configs = [config_row(PP4, 4, 8, 4, 2, 82_417, boot_ok=False, boot_error="CUDA OOM",
                          topology_ok="", log_clean=""),
               config_row(PP8, 8, 4, 4, 3, 79_407)]
    run = _partial(tmp_path / "partial", {PP4: [8, 16], PP8: [8, 16]}, configs,
                   baseline_note=NO_RUN)
    verdicts = analyse(run)[2]
    failed = [v for v in verdicts if v.config_id == PP4]
    assert [v.concurrency for v in failed] == [8, 16] and not any(v.valid for v in failed)
    assert "boot failed: CUDA OOM" in failed[0].text and "no rounds at C=8" in failed[0].text
    assert {v.config_id for v in verdicts} == {PP4, PP8}


def test_deselected_points_of_a_selected_layout_are_not_judged(tmp_path: Path) -> None:
    rows = [r for p in seed_points([PP8]) if p.concurrency == 16 for r in rounds(p)]
    run = write_run(tmp_path / "c16", rows, [config_row(PP8, 8, 4, 4, 3, 79_407)],
                    baseline=PP1, order=list(SEED_LAYOUTS), concurrencies=[8, 16],
                    selected={PP8: [16]}, baseline_note=NO_RUN)  # -k "pp8 and c16"
    _, summary, verdicts, rec = analyse(run)
    assert [(v.config_id, v.concurrency, v.valid) for v in verdicts] == [(PP8, 16, True)]
    assert summary.concurrencies == (16,) and rec[0].answer == PP8


def test_deltas_use_the_earlier_runs_baseline(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    full = seed_run(reports / "full", run_id="full")
    run = _partial(reports / "partial", {PP8: [8, 16]},
                   baseline_from={"run_id": "full", "path": str(full.resolve())})
    data, summary, verdicts, rec = analyse(run)
    lines = terminal_summary(summary, verdicts, rec, width=100)
    line = f"baseline {PP1} from run full (manifest identical except layout)"
    assert line in lines and summary.baseline_run == "full" and not summary.no_deltas
    pp8 = next(x for x in lines if x.startswith("8 / 4 / 4") and " 8 " in x)
    assert "+170.40 %" in pp8 and "VALID" in pp8  # 8,809.50 vs the full run's PP1 3,257.96
    assert "ΔTPS" in "\n".join(lines) and "INVALID" not in "\n".join(lines)
    page = "\n".join(html_summary(data, summary, verdicts, rec))
    assert f"Medians over repeats; {line}" in page and "+170.40 %" in page
    summarize(run)
    table = pd.read_csv(run / "summary.csv")
    assert set(table["baseline_from"]) == {"full"}
    assert table.loc[table["concurrency"] == 8, "tps_vs_base_pct"].round(2).tolist() == [170.40]
    # A full run's own baseline: its summary.csv names the run itself.
    summarize(full)
    assert set(pd.read_csv(full / "summary.csv")["baseline_from"]) == {"full"}
    # The gate compares layout by layout with its reference: unaffected by where deltas come from.
    rows = compare(run, full, dict(parse_thresholds([])))
    assert not regressions(rows) and PP8 in {r.config_id for r in rows}


def test_moved_reports_folder_finds_the_earlier_run_by_id(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    seed_run(reports / "full", run_id="full")
    run = _partial(reports / "partial", {PP8: [8, 16]},
                   baseline_from={"run_id": "full", "path": "/moved/away/full"})
    assert f"baseline {PP1} from run full (manifest identical except layout)" in _lines(run)
    gone = _partial(tmp_path / "other" / "partial", {PP8: [8, 16]},
                    baseline_from={"run_id": "full", "path": "/moved/away/full"})
    lines = _lines(gone)
    assert any(x.startswith(f"baseline {PP1}: earlier run not found at") for x in lines)
    assert "ΔTPS" not in "\n".join(lines)


# -- choosing the earlier run (continuity.manifest.earlier_baseline) ---------------------------

def _sweep(**server: Any) -> Sweep:
    sweep = load(SEED)
    return replace(sweep, server={**sweep.server, **server}) if server else sweep


def _baseline_manifest(sweep: Sweep) -> dict[str, Any]:
    config = sweep.config(PP1)
    return manifest.build(sweep, sweep.cluster(None), config)


def _earlier(reports: Path, name: str, written: str, sweep: Sweep) -> Path:
    run = seed_run(reports / name, run_id=name)
    target = manifest.write(run, PP1, _baseline_manifest(sweep))
    data = json.loads(target.read_text())
    data["run"]["written"] = written
    target.write_text(json.dumps(data))
    return run


def test_newest_matching_earlier_run_is_chosen_and_differing_ones_skipped(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    wanted = _baseline_manifest(_sweep())
    _earlier(reports, "older", "2026-11-01T10:00:00+00:00", _sweep())
    middle = _earlier(reports, "middle", "2026-11-02T10:00:00+00:00", _sweep())
    _earlier(reports, "newest", "2026-11-03T10:00:00+00:00", _sweep(chunked_prefill_size=16384))
    current = reports / "current"
    current.mkdir()
    found, skipped = manifest.earlier_baseline(reports, PP1, wanted, exclude=current)
    assert found == middle
    assert len(skipped) == 1 and skipped[0].startswith("newest: ")
    assert "server.chunked_prefill_size: 16384 → 8192" in skipped[0]


def test_an_earlier_run_whose_baseline_did_not_complete_is_skipped(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    run = _earlier(reports, "broken", "2026-11-03T10:00:00+00:00", _sweep())
    results = pd.read_csv(run / "results.csv")
    results.loc[(results["config_id"] == PP1) & (results["repeat"] == 2), "completed"] = 39
    results.to_csv(run / "results.csv", index=False)
    found, skipped = manifest.earlier_baseline(reports, PP1, _baseline_manifest(_sweep()))
    assert found is None
    assert len(skipped) == 1 and skipped[0].startswith(
        f"broken: {PP1} C=8: repeat(s) 2 not completed 40/40 in the reference run")


def test_no_earlier_run_finds_nothing(tmp_path: Path) -> None:
    wanted = _baseline_manifest(_sweep())
    assert manifest.earlier_baseline(tmp_path / "missing", PP1, wanted) == (None, [])
    seed_run(tmp_path / "no-manifest")  # a run without the baseline's manifest is no candidate
    assert manifest.earlier_baseline(tmp_path, PP1, wanted) == (None, [])


def test_layouts_an_interrupted_run_never_reached_are_not_run_never_invalid(
        tmp_path: Path) -> None:
    """Interrupted after PP8 (measured): PP1, PP2, PP4 and PP16 never started (no configs.csv
    row, no rounds). They are not run: no verdict, no INVALID in any view or count, and the
    answer names them not run (not failed)."""
    layouts = list(SEED_LAYOUTS)
    missing = [c for c in layouts if c != PP8]
    run = _partial(tmp_path / "stopped", {c: [8, 16] for c in layouts},
                   run_status="interrupted",
                   run_status_detail={"measured": [PP8], "missing": missing,
                                      "interrupted_at": None, "resume": "pytest x"})
    _, summary, verdicts, answers = analyse(run)
    assert {v.config_id for v in verdicts} == {PP8}
    text = "\n".join(terminal_summary(summary, verdicts, answers, width=100))
    assert "no configs.csv row" not in text and "INVALID" not in text
    from pytest_ppsweep.gate.history import read_run

    record = read_run(run)[0]
    assert (record.valid, record.invalid) == (2, 0)
    assert all(why for a in answers for _p, why in a.excluded if "configs.csv" not in why)
    assert not any(p in missing for a in answers for p, _why in a.excluded)


def test_a_layout_whose_cluster_left_the_pool_is_not_run_in_a_partial_run(
        tmp_path: Path) -> None:
    layouts = list(SEED_LAYOUTS)
    left = {**config_row(PP4, 4, 8, 4, 2, 0), "boot_ok": None,
            "boot_error": "not run: its cluster left the pool"}
    run = _partial(tmp_path / "left", {c: [8, 16] for c in layouts},
                   configs=[config_row(PP8, 8, 4, 4, 3, 79_407), left],
                   run_status="partial",
                   run_status_detail={"measured": [PP8], "missing": [c for c in layouts
                                                                      if c != PP8]})
    verdicts = analyse(run)[2]
    assert {v.config_id for v in verdicts} == {PP8}
