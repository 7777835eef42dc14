"""report/format.fit_table: a table fits the width or wraps, and nothing is cut."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import cast

from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.report.format import fit_table
from pytest_ppsweep.run.rounds import round_metrics

TITLES = ["config", "C", "Input TPS", "verdict"]
ROWS: list[list[str] | str] = ["Δ vs pp1:", ["pp1-tp32-ep4", "8", "3,257.96", "VALID"],
                               ["pp8-tp4-ep4", "16", "8,809.50", "INVALID (+2 extra)"]]


def test_side_by_side_when_it_fits() -> None:
    assert fit_table(TITLES, ROWS, 80, align="<>><") == [
        "config         C  Input TPS  verdict",
        "Δ vs pp1:",
        "pp1-tp32-ep4   8   3,257.96  VALID",
        "pp8-tp4-ep4   16   8,809.50  INVALID (+2 extra)",
    ]


def test_the_key_over_its_values_when_too_wide() -> None:
    lines = fit_table(TITLES, ROWS, 38, align="<>><")
    assert lines == [
        "config",
        "     C  Input TPS  verdict",
        "Δ vs pp1:",
        "pp1-tp32-ep4",
        "     8   3,257.96  VALID",
        "pp8-tp4-ep4",
        "    16   8,809.50  INVALID (+2 extra)",
    ]


def test_title_value_pairs_never_broken_when_narrower_still() -> None:
    lines = fit_table(TITLES, ROWS, 24, align="<>><")
    assert all(len(line) <= 24 for line in lines)
    assert lines[:4] == ["Δ vs pp1:", "config: pp1-tp32-ep4", "    C: 8", "    Input TPS: 3,257.96"]
    joined = " ".join(line.strip() for line in lines)
    for cell in ("pp8-tp4-ep4", "C: 16", "Input TPS: 8,809.50", "INVALID (+2 extra)"):
        assert cell in joined


def test_a_decode_rounds_line_shows_decode_metrics() -> None:
    result = cast(RoundResult, SimpleNamespace(
        input_tps=139.59, ttft_p50_s=0.67, output_tps=33.57, tpot_p50_s=0.0262,
        itl_p50_s=math.nan))
    assert round_metrics(result, decode=True) == "output TPS 33.57, TPOT p50 26.2 ms, ITL p50 n/a"
    assert round_metrics(result, decode=False) == "Input TPS 139.59, TTFT p50 0.67 s"
