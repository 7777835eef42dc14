"""``[[expect]]`` read and validated (matrix/expectspec.py): a glob on the layout id, axis
values by name, the failure kind and a reason; bad keys name the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.matrices import seed_text

from pytest_ppsweep.matrix.expectspec import Expectation, expectation_for
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.schema import MatrixError

A2A = Path(__file__).resolve().parents[2] / "test_matrix" / "a2a.toml"


def test_a2a_expects_pp4_deepep_to_oom_and_nothing_else() -> None:
    sweep = load(A2A)
    expected = {c.id: sweep.expectation(c) for c in sweep.configs}
    assert [cid for cid, e in expected.items() if e] == ["pp4-tp8-ep8-a2a_deepep"]
    e = expected["pp4-tp8-ep8-a2a_deepep"]
    assert e is not None and e.failure == "oom"
    assert e.reason.startswith("the emulator's own estimate")
    assert e.covers("cuda-oom") and not e.covers("nccl") and not e.covers("")


def test_boot_covers_any_cause_and_axes_must_all_match() -> None:
    e = Expectation(failure="boot", reason="r", layout="pp*-tp8-*", axes={"chunk": "4096"})
    assert e.covers("nccl") and e.covers("")
    assert e.matches("pp4-tp8-ep4", {"chunk": 4096})
    assert not e.matches("pp4-tp8-ep4", {"chunk": 8192})
    assert not e.matches("pp8-tp4-ep4", {"chunk": 4096})
    assert expectation_for([e], "pp8-tp4-ep4", {}) is None


@pytest.mark.parametrize(("table", "pattern"), [
    ('[[expect]]\nfailure = "oom"\n', r"key 'expect\[0\]\.reason': expected a value \(required\)"),
    ('[[expect]]\nfailure = "slow"\nreason = "x"\n',
     r"key 'expect\[0\]\.failure': expected one of 'oom', 'nccl', 'watchdog', 'engine', 'boot'"),
    ('[[expect]]\nfailure = "oom"\nreason = "x"\nmoe_a2a_backend = "deepep"\n',
     r"expect\[0\]"),
])
def test_bad_tables_name_the_key(tmp_path: Path, table: str, pattern: str) -> None:
    path = tmp_path / "ppsweep.toml"
    path.write_text(seed_text() + "\n" + table)
    with pytest.raises(MatrixError, match=pattern) as info:
        load(path)
    assert str(path) in str(info.value)

