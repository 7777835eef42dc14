"""Energy per token in the summaries (report/energyview.py over results/aggregate.py): per point
the median over its rounds whose energy is valid, the reasons where a point has none (never a
number), labelled GPU board energy, not wall power; a run written before the energy columns
shows no energy at all."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from support.runs import Point, config_row, rounds, write_run

from pytest_ppsweep.measure.energy import LABEL
from pytest_ppsweep.report.energyview import energy_html, energy_lines
from pytest_ppsweep.report.terminal import terminal_summary
from pytest_ppsweep.results.aggregate import energy_points
from pytest_ppsweep.results.pipeline import analyse

CELLS = {  # per config: each round's (J per total token, reasons)
    "pp2-tp1-ep1": [(10.0, ""), (12.0, ""), (11.0, "")],
    "pp1-tp2-ep1": [(None, "no_gpus")] * 3,
    "pp1-tp1-ep1": [(5.0, ""), (None, "counter_reset"), (7.0, "")],
}


def _run(tmp_path: Path, energy: bool = True) -> Path:
    rows = []
    for i, cid in enumerate(CELLS):
        pp, tp = int(cid[2]), int(cid[6])
        rows += rounds(Point(cid, pp, tp, 1, 4, 1000.0 * (i + 1), 1.0, 2.0))
    configs = [config_row(cid, int(cid[2]), int(cid[6]), 1, i, 70_000)
               for i, cid in enumerate(CELLS)]
    run = write_run(tmp_path / "run", rows, configs)
    if energy:
        frame = pd.read_csv(run / "results.csv")
        cells = [c for cid in CELLS for c in CELLS[cid]]
        frame["energy_j_per_total_token"] = [j for j, _ in cells]
        frame["energy_j_per_output_token"] = [None if j is None else j * 9 for j, _ in cells]
        frame["energy_method"] = ["counter" if j is not None else "" for j, _ in cells]
        frame["energy_reasons"] = [r for _, r in cells]
        frame.to_csv(run / "results.csv", index=False)
    return run


def test_each_point_shows_its_median_or_why_it_has_none(tmp_path: Path) -> None:
    _, summary, verdicts, answers = analyse(_run(tmp_path))
    shown = {p["point"]: p for p in energy_points(summary)["points"]}  # type: ignore[index]
    assert shown["pp2-tp1-ep1"]["j_per_total_token"] == 11.0
    assert shown["pp2-tp1-ep1"]["j_per_output_token"] == 99.0
    assert shown["pp2-tp1-ep1"]["valid"] and shown["pp2-tp1-ep1"]["reasons"] == []
    absent = shown["pp1-tp2-ep1"]
    assert absent["j_per_total_token"] is None and not absent["valid"]
    assert absent["reasons"] == ["no_gpus"] and absent["method"] is None
    # a point with one invalid round: the median of the valid ones, the reason kept beside it
    assert shown["pp1-tp1-ep1"]["j_per_total_token"] == 6.0
    assert shown["pp1-tp1-ep1"]["reasons"] == ["counter_reset"]
    lines = terminal_summary(summary, verdicts, answers, width=100)
    text = "\n".join(lines)
    assert f"Energy per token, medians over rounds ({LABEL})" in text
    assert "absent: no_gpus" in text and "some rounds not valid: counter_reset" in text
    assert all(len(line) <= 100 for line in lines)
    page = energy_html(summary)
    assert LABEL in page and "absent: no_gpus" in page and "11.00" in page


def test_a_run_without_energy_columns_shows_none(tmp_path: Path) -> None:
    _, summary, _, _ = analyse(_run(tmp_path, energy=False))
    assert energy_points(summary) is None
    assert energy_lines(summary) == [] and energy_html(summary) == ""
