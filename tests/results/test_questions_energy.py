"""An objective a sweep can name: "least energy per token" (``objective =
["energy_j_per_total_token"]``): the layout question ranks by J/token, lower first, from each
point's rounds whose energy is valid, and a faster layout does not win on speed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from support.runs import Point, config_row, rounds, write_run

from pytest_ppsweep.results.answers import DECIDED
from pytest_ppsweep.results.objective import higher_is_better
from pytest_ppsweep.results.pipeline import analyse

OBJECTIVE = "energy_j_per_total_token"


def test_least_energy_per_token_decides_the_layout(tmp_path: Path) -> None:
    # the fast layout costs more J/token (its GPUs draw more), the slow one less
    rows = rounds(Point("pp1-tp4-ep1", 1, 4, 1, 4, 9000.0, 1.0, 2.0), repeats=5) + rounds(
        Point("pp4-tp1-ep1", 4, 1, 1, 4, 6000.0, 1.5, 2.5), repeats=5)
    configs = [config_row("pp1-tp4-ep1", 1, 4, 1, 0, 70_000),
               config_row("pp4-tp1-ep1", 4, 1, 1, 1, 70_000)]
    run = write_run(tmp_path / "run", rows, configs,
                    workload={"input_len": 4096, "output_len": 1, "objective": [OBJECTIVE]})
    frame = pd.read_csv(run / "results.csv")
    fast = frame["config_id"] == "pp1-tp4-ep1"
    frame[OBJECTIVE] = [(20.0 if f else 12.0) + 0.05 * i for i, f in enumerate(fast)]
    frame["energy_method"] = "counter"
    frame.to_csv(run / "results.csv", index=False)
    assert not higher_is_better(OBJECTIVE)
    _, _, _, answers = analyse(run)
    layout = next(a for a in answers if a.kind == "layout")
    assert layout.objective == (OBJECTIVE,)
    assert layout.status == DECIDED and layout.answer == "pp4-tp1-ep1", layout
