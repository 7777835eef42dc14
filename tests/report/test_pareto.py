"""The Pareto points, front, pareto.csv and the planner's predictions (report/pareto.py): only
from a fit that reproduces its own points; a misfit draws none and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.runs import seed_run
from support.slo import searched

from pytest_ppsweep.planner.data import load_run_folder
from pytest_ppsweep.planner.fitting import fit
from pytest_ppsweep.report.pareto import Point, front, points, predictions, section_html
from pytest_ppsweep.results.cost import per_million, text

SLO = {"limits": [{"metric": "ttft", "percentile": 50, "limit_s": 30.0}]}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    run = seed_run(tmp_path / "kimi3-slo-20261201-093000",
                   workload={"output_len": 1, "input_len": 16384, "slo": SLO}, gpu_hour_usd=2.0)
    searched(run, "pp8-tp4-ep4", 0.45, 0.6)
    fit(load_run_folder(run)).write(run / "planner" / "profile.json")
    return run


def test_the_front_is_what_nothing_beats_on_both_axes() -> None:
    a, b, c = (Point("a", 8, "round", "C=8", 1.0, 5.0), Point("b", 8, "round", "C=8", 2.0, 4.0),
               Point("c", 8, "round", "C=8", 1.5, 3.0))
    pred = Point("p", 8, "predicted", "C=8", 9.0, 9.0)
    assert front([a, b, c, pred]) == [a, b]


def test_points_of_rounds_and_probes_judged_against_the_slo(run: Path) -> None:
    pts = points(run)
    rounds = {(p.config_id, p.load): p for p in pts if p.source == "round"}
    pp8 = rounds[("pp8-tp4-ep4", "C=8")]
    assert pp8.x == pytest.approx(1 / 13.47, rel=0.02) and pp8.within  # 13.5 s ≤ 30 s
    assert not rounds[("pp1-tp32-ep4", "C=8")].within  # 39 s
    assert pp8.y == pytest.approx(8809.5 / 32, rel=0.02)
    assert pp8.usd_per_m == pytest.approx(per_million(pp8.y * 32, 32, 2.0))
    assert {p.load for p in pts if p.source == "probe"} == {"0.45 req/s", "0.6 req/s"}


def test_predictions_for_layouts_not_booted_only_from_a_trusted_fit(run: Path) -> None:
    pts, misfit = predictions(run, points(run))
    assert misfit == [] and {p.config_id for p in pts} == {"pp32-tp1"}
    assert all(p.x_lo is not None and p.x_lo <= p.x <= (p.x_hi or 0) for p in pts)
    profile = run / "planner" / "profile.json"
    raw = json.loads(profile.read_text())
    raw["misfit"] = ["pp16-tp2-ep2 C=8: Input TPS measured 482, predicted 4,537 [3,936, 5,229]"]
    profile.write_text(json.dumps(raw))
    pts, misfit = predictions(run, points(run))
    assert pts == [] and "misfit" in misfit[0] and "pp16-tp2-ep2 C=8" in misfit[1]
    html = section_html(run)
    assert "Planner misfit" in html and 'class="predicted"' not in html
    assert ",predicted," not in (run / "pareto.csv").read_text()


def test_cost_per_million_tokens() -> None:
    # 32 GPUs at $2/GPU-h = $64/h; 8,000 tok/s = 28.8 M tok/h → $2.22 per million
    assert per_million(8000.0, 32, 2.0) == pytest.approx(64 / 28.8)
    assert per_million(8000.0, 32, None) is None and per_million(0.0, 32, 2.0) is None
    assert text(2.2222) == "$2.22/M tok" and text(None) == "n/a"
