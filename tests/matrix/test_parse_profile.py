"""The [profile] table of the sweep file: what it selects, and every mistake naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.matrices import seed_text
from support.paths import REPO

from pytest_ppsweep.matrix.model import MatrixError
from pytest_ppsweep.matrix.parse import load

SEED = REPO / "test_matrix" / "ppsweep.toml"


def _with_profile(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "ppsweep.toml"
    path.write_text(seed_text() + "\n[profile]\n" + table)
    return path


def test_profile_table_names_layouts_and_the_round(tmp_path: Path) -> None:
    sweep = load(_with_profile(tmp_path, 'layouts = ["pp1", "pp8"]\nconcurrency = 16\n'))
    assert sweep.profile is not None
    assert sweep.profile.layouts == ("pp1-tp32-ep4", "pp8-tp4-ep4")
    assert sweep.profile.concurrency == 16 and sweep.profile.num_steps == 3
    assert sweep.profile.covers("pp8-tp4-ep4") and not sweep.profile.covers("pp4-tp8-ep4")
    assert load(SEED).profile is None  # no table, no profile window (unless --ppsweep-profile)


@pytest.mark.parametrize(
    ("table", "message"),
    [('layouts = ["pp3"]\n', "key 'profile.layouts': expected ids of layouts"),
     ("concurrency = 12\n", "key 'profile.concurrency': expected one of the workload's"),
     ('activities = ["GPUS"]\n', "key 'profile.activities': expected a non-empty list"),
     ("num_steps = 0\n", "key 'profile.num_steps'"),
     ("num_step = 3\n", "num_step")],
)
def test_profile_table_mistakes_name_the_key(tmp_path: Path, table: str, message: str) -> None:
    path = _with_profile(tmp_path, table)
    with pytest.raises(MatrixError) as err:
        load(path)
    assert str(path) in str(err.value) and message in str(err.value)
