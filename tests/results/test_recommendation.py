"""The recommendation (seed §10) is derived from the data: change the numbers, it changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.runs import SEED_MEDIANS, Point, config_row, rounds, seed_run, write_run

from pytest_ppsweep.results.aggregate import load_run, summarize_run
from pytest_ppsweep.results.recommendation import Recommendation, recommend
from pytest_ppsweep.results.verdict import judge

P1, P2, P4, P8, P16 = "pp1-tp32-ep4", "pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2"


def _recommend(run: Path) -> Recommendation:
    data = load_run(run)
    summary = summarize_run(data)
    return recommend(summary, judge(data, summary))


def test_seed_decision(tmp_path: Path) -> None:
    rec = _recommend(seed_run(tmp_path / "seed"))
    assert (rec.primary, rec.fallback) == (P8, P4)
    assert rec.ranking == (P8, P4, P16, P2, P1)
    text = rec.text
    assert "C=8 Input TPS +23.12 %, TTFT p50 -22.05 %" in text  # margin over the fallback
    assert "C=8 Input TPS +170.40 %" in text  # vs baseline
    assert f"{P8} 6,244 MiB vs {P4} 3,234 MiB (+3,010 MiB); the most among valid" in text


def test_swapped_numbers_change_the_decision(tmp_path: Path) -> None:
    medians = {c: dict(rows) for c, rows in SEED_MEDIANS.items()}
    for conc in medians:
        medians[conc][P8], medians[conc][P2] = medians[conc][P2], medians[conc][P8]
    rec = _recommend(seed_run(tmp_path / "swapped", medians))
    assert (rec.primary, rec.fallback) == (P2, P4)
    assert f"the most among valid layouts is {P8} (6,244 MiB)" in rec.text


def test_invalid_layout_is_not_recommended(tmp_path: Path) -> None:
    run = seed_run(tmp_path / "seed")
    results = run / "results.csv"
    lines = results.read_text().splitlines()
    # Break one round of PP8 at C=16: 39/40 completed.
    index = next(i for i, line in enumerate(lines) if line.split(",")[1] == P8
                 and line.split(",")[5] == "16")
    fields = lines[index].split(",")
    fields[8] = "39"
    lines[index] = ",".join(fields)
    results.write_text("\n".join(lines) + "\n")
    rec = _recommend(run)
    assert (rec.primary, rec.fallback) == (P4, P16)
    assert rec.excluded == (P8,)
    assert f"Not eligible (invalid at some C): {P8}." in rec.text


def _two(tmp_path: Path, second: Point, headroom: tuple[float, float] = (5000, 5000),
         **meta: Any) -> Recommendation:
    first = Point("first", 4, 8, 4, 8, 8000.0, 15.0, 16.0)
    configs = [config_row("first", 4, 8, 4, 0, 85_651 - headroom[0]),
               config_row("second", 8, 4, 4, 1, 85_651 - headroom[1])]
    run = write_run(tmp_path / "run", rounds(first) + rounds(second), configs, **meta)
    return _recommend(run)


def test_tps_within_spread_is_a_tie_decided_by_ttft(tmp_path: Path) -> None:
    # 0.2 % more TPS is inside the 0.6 % run-to-run spread; the lower TTFT decides.
    rec = _two(tmp_path, Point("second", 8, 4, 4, 8, 8016.0, 14.0, 15.0))
    assert rec.primary == "second"
    assert "Input TPS tied within the measured spread" in rec.text


def test_clear_tps_win_beats_ttft(tmp_path: Path) -> None:
    rec = _two(tmp_path, Point("second", 8, 4, 4, 8, 8400.0, 15.5, 16.5))
    assert rec.primary == "second"
    assert "highest Input TPS" in rec.text
    assert "Trade-off: first has lower TTFT p50 at C=8" in rec.text


def test_full_tie_decided_by_headroom_then_sweep_order(tmp_path: Path) -> None:
    same = Point("second", 8, 4, 4, 8, 8000.0, 15.0, 16.0)
    assert _two(tmp_path / "a", same, headroom=(3000, 6000)).primary == "second"
    rec = _two(tmp_path / "b", same, headroom=(5000, 5000))
    assert (rec.primary, rec.fallback) == ("first", "second")
    assert "first in sweep order" in rec.text


def test_no_valid_layout(tmp_path: Path) -> None:
    rows = rounds(Point("only", 8, 4, 4, 8, 8000.0, 15.0, 16.0), repeats=1)
    run = write_run(tmp_path / "run", rows, [config_row("only", 8, 4, 4, 0, 80_000)])
    rec = _recommend(run)
    assert rec.primary is None and rec.fallback is None and rec.ranking == ()
    assert rec.text.startswith("No recommendation")


def test_single_layout(tmp_path: Path) -> None:
    rows = rounds(Point("only", 8, 4, 4, 8, 8000.0, 15.0, 16.0))
    run = write_run(tmp_path / "run", rows, [config_row("only", 8, 4, 4, 0, 80_000)])
    rec = _recommend(run)
    assert (rec.primary, rec.fallback) == ("only", None)
    assert "no fallback" in rec.text


def test_empty_run(tmp_path: Path) -> None:
    rec = _recommend(write_run(tmp_path / "run", [], []))
    assert rec.primary is None
