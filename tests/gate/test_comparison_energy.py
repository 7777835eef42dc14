"""A gate row on energy: J per token is gated only when a threshold names it
(``energy_per_token:+5%``); then a rise beyond the threshold and the noise is a regression."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from support.runs import Point, record_run

from pytest_ppsweep.gate.comparison import compare, parse_thresholds, regressions

POINT = Point("pp1-tp4-ep1", 1, 4, 1, 8, 9000.0, 1.0, 2.0)


def _run(root: Path, run_id: str, j_per_token: float) -> Path:
    run = record_run(root, run_id, [POINT])
    frame = pd.read_csv(run / "results.csv")
    frame["energy_j_per_total_token"] = [j_per_token * (1 + 0.002 * (i - 1))
                                         for i in range(len(frame))]
    frame["energy_method"] = "counter"
    frame.to_csv(run / "results.csv", index=False)
    return run


def test_energy_per_token_is_gated_when_a_threshold_names_it(tmp_path: Path) -> None:
    ref = _run(tmp_path, "ref", 10.0)
    cur = _run(tmp_path, "cur", 12.0)  # 20 % more J/token
    assert not regressions(compare(cur, ref))  # not gated by default
    rows = compare(cur, ref, parse_thresholds(["energy_per_token:+5%"]))
    (bad,) = regressions(rows)
    assert bad.metric == "energy_per_token" and bad.delta_pct > 15
    assert "J/token" in bad.message and "regression" in bad.message
    same = _run(tmp_path, "same", 10.0)
    assert not regressions(compare(same, ref, parse_thresholds(["energy_per_token:+5%"])))
