"""Validity gates the exit code: an INVALID point fails ``test_valid`` with every reason, and
``[sweep] spread_rule = "warn"`` turns the spread rule into a warning."""

from __future__ import annotations

import csv
import importlib.util
import warnings
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, cast

import pytest
from support.matrices import replace_once, seed_text
from support.runs import PROMPT_TOKENS, Point, config_row, rounds, write_run

from pytest_ppsweep.matrix.model import MatrixError
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.pointchecks import validity_problems
from pytest_ppsweep.results.aggregate import load_run, summarize_run
from pytest_ppsweep.results.verdict import judge, point_verdict

REPO = Path(__file__).resolve().parents[2]
GOOD = Point("good", 8, 4, 4, 8, 8800.0, 13.5, 16.4)
BAD = Point("bad", 4, 8, 4, 8, 7100.0, 17.3, 18.6)


def _run(tmp_path: Path, bad_rows: list[dict[str, Any]], **meta: Any) -> Path:
    configs = [config_row("good", 8, 4, 4, 0, 79_000), config_row("bad", 4, 8, 4, 1, 82_000)]
    return write_run(tmp_path / "run", rounds(GOOD) + bad_rows, configs, baseline="good",
                     **meta)


def _three_reasons() -> list[dict[str, Any]]:
    # Two repeats of three (min_repeats 3), a wide spread and a token mismatch in repeat 2.
    rows = rounds(BAD, repeats=2, jitter=0.02)
    rows[1]["input_tokens"] = PROMPT_TOKENS - 360
    return rows


def _acceptance() -> ModuleType:
    spec = importlib.util.spec_from_file_location("acceptance", REPO / "test_matrix" /
                                                  "test_sweep.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ppsweep(run_dir: Path) -> Any:
    return cast(Any, SimpleNamespace(store=SimpleNamespace(dir=run_dir)))


def test_validity_problems_list_every_reason(tmp_path: Path) -> None:
    run = _run(tmp_path, _three_reasons())
    validity = validity_problems(run, "bad", 8)
    assert validity.problems == [
        f"bad C=8: INVALID: server counted {PROMPT_TOKENS - 360:,} prompt tokens, sent "
        f"{PROMPT_TOKENS:,} in repeat 2",
        "bad C=8: INVALID: spread 4.0 % > 2.0 %",
        "bad C=8: INVALID: 2 repeat(s) < 3 required",
    ]
    assert validity.warnings == []
    assert validity_problems(run, "good", 8).problems == []


def test_test_valid_fails_with_every_reason(tmp_path: Path) -> None:
    run = _run(tmp_path, _three_reasons())
    test_valid = _acceptance().test_valid
    with pytest.raises(AssertionError) as info:
        test_valid(_ppsweep(run), SimpleNamespace(id="bad"), 8)
    text = str(info.value)
    for reason in ("prompt tokens", "spread 4.0 % > 2.0 %", "2 repeat(s) < 3 required"):
        assert reason in text, text
    test_valid(_ppsweep(run), SimpleNamespace(id="good"), 8)  # a VALID point passes


def test_spread_rule_warn_makes_spread_a_warning(tmp_path: Path) -> None:
    run = _run(tmp_path, rounds(BAD, jitter=0.02), spread_rule="warn")
    verdict = point_verdict(run, "bad", 8)
    assert verdict.valid and verdict.failures == ()
    assert verdict.warnings == ("spread 4.0 % > 2.0 %",)
    assert verdict.text == "VALID (warning: spread 4.0 % > 2.0 %)"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _acceptance().test_valid(_ppsweep(run), SimpleNamespace(id="bad"), 8)
    assert [str(w.message) for w in seen] == [
        "spread_rule = 'warn': bad C=8: spread 4.0 % > 2.0 %"]


def test_spread_rule_warn_keeps_the_other_rules(tmp_path: Path) -> None:
    run = _run(tmp_path, _three_reasons(), spread_rule="warn")
    validity = validity_problems(run, "bad", 8)
    assert [p.split("INVALID: ")[1][:6] for p in validity.problems] == ["server", "2 repe"]
    assert validity.warnings == ["bad C=8: spread 4.0 % > 2.0 %"]


def test_the_default_is_strict(tmp_path: Path) -> None:
    run = _run(tmp_path, rounds(BAD, jitter=0.02))  # no spread_rule in run.json
    assert point_verdict(run, "bad", 8).failures == ("spread 4.0 % > 2.0 %",)


def test_log_scan_counts_only_once_recorded(tmp_path: Path) -> None:
    # test_valid runs before teardown records the log scan: not recorded yet is no reason;
    # the report (judge without pending) still says so, and a failed scan counts.
    configs = [config_row("good", 8, 4, 4, 0, 79_000, log_clean="")]
    run = write_run(tmp_path / "run", rounds(GOOD), configs, baseline="good")
    assert point_verdict(run, "good", 8).valid
    data = load_run(run)
    assert judge(data, summarize_run(data))[0].failures == ("log scan not recorded",)
    configs = [config_row("good", 8, 4, 4, 0, 79_000, log_clean=False, log_findings="OOM")]
    run = write_run(tmp_path / "run2", rounds(GOOD), configs, baseline="good")
    assert point_verdict(run, "good", 8).failures == ("log scan: OOM",)


def test_topology_and_missing_rounds_are_reasons(tmp_path: Path) -> None:
    configs = [config_row("good", 8, 4, 4, 0, 79_000, topology_ok=False)]
    run = write_run(tmp_path / "run", rounds(GOOD), configs, baseline="good",
                    concurrencies=[8, 16])
    assert point_verdict(run, "good", 8).failures == ("topology not as requested",)
    assert point_verdict(run, "good", 16).failures == ("topology not as requested",
                                                       "no rounds at C=16")


def test_sweep_file_spread_rule(tmp_path: Path) -> None:
    seed = seed_text()
    assert load(REPO / "test_matrix" / "ppsweep.toml").spread_rule == "fail"  # strict default
    path = tmp_path / "ppsweep.toml"
    path.write_text(replace_once(seed, "[sweep]\n", '[sweep]\nspread_rule = "warn"\n'))
    assert load(path).spread_rule == "warn"
    path.write_text(replace_once(seed, "[sweep]\n", '[sweep]\nspread_rule = "ignore"\n'))
    with pytest.raises(MatrixError) as info:
        load(path)
    assert str(info.value) == (f"{path}: key 'sweep.spread_rule': expected one of 'fail', "
                               "'warn', found str 'ignore'")


def test_a_verdict_is_judged_again_only_when_the_run_folder_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """test_valid asks once per C with nothing written in between: the second point reuses
    the first one's judgement; a changed results.csv (or configs.csv) is judged again."""
    from pytest_ppsweep.results import verdict

    run = _run(tmp_path, rounds(BAD, repeats=2))
    loads: list[Path] = []
    real_load = verdict.load_run
    monkeypatch.setattr(verdict, "load_run", lambda d: loads.append(d) or real_load(d))
    first = point_verdict(run, "bad", 8)
    assert point_verdict(run, "good", 8).valid and len(loads) == 1
    assert point_verdict(run, "bad", 8) == first and len(loads) == 1
    assert "2 repeat(s) < 3 required" in " ".join(first.failures)
    with (run / "results.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = list(reader.fieldnames or []), list(reader)
    third = {**next(r for r in rows if r["config_id"] == "bad"), "repeat": "3"}
    with (run / "results.csv").open("a", newline="") as fh:
        csv.DictWriter(fh, fieldnames=header).writerow(third)
    again = point_verdict(run, "bad", 8)
    assert len(loads) == 2 and "repeat(s) < 3" not in " ".join(again.failures)
