"""run/rounds.py's extra round for a spread over the limit looks within the boot being
measured, as the spread rule does (stats/spread.boot_spread_pct): a resumed point whose
earlier rounds came from another boot differs from them by the boot-to-boot level, which one
more round here cannot outvote. The run folder's rows are stand-ins; the rule is the real one."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.run.rounds import Rounds

SEEDS = Path(__file__).resolve().parents[2] / "test_matrix" / "ppsweep.toml"
POINT = "pp8-tp4-ep4"


def _row(repeat: int, tps: float, boot: str) -> dict[str, Any]:
    return {"config_id": POINT, "concurrency": "8", "repeat": str(repeat), "boot": boot,
            "input_tps": str(tps), "num_requests": "40", "completed": "40", "failed": "0",
            "input_tokens": "655360", "input_tokens_nominal": "655360", "output_tokens": "40",
            "output_tokens_nominal": "40"}


def _more(rows: list[dict[str, Any]], boot: str) -> str | None:
    sweep = dataclasses.replace(load(SEEDS, None), spread_rule="fail")
    store = SimpleNamespace(result_rows=lambda: rows)
    rounds = Rounds(cast(Any, SimpleNamespace(sweep=sweep, store=store)))
    workload = sweep.workload_of(next(c for c in sweep.configs if c.id == POINT))
    return rounds._more_rounds(POINT, 8, workload, 3, 8, boot)


def test_a_spread_within_the_boot_asks_for_one_more_round() -> None:
    rows = [_row(1, 6000.0, "boot-a"), _row(2, 6010.0, "boot-a"), _row(3, 6600.0, "boot-a")]
    why = _more(rows, "boot-a")
    assert why is not None and why.startswith("spread ")


def test_an_earlier_boots_offset_asks_for_no_extra_round() -> None:
    # rounds 1-2 on the first boot, round 3 on the resume's boot, 10 % apart: pooled, that is a
    # spread over the 2 % limit; within each boot there is none to fix with one more round
    rows = [_row(1, 6000.0, "boot-a"), _row(2, 6010.0, "boot-a"), _row(3, 6600.0, "boot-b")]
    assert _more(rows, "boot-b") is None
    # the same values on one boot ask for it (the first test): only the boot differs
