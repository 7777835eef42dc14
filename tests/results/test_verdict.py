"""Validity verdicts: each failed condition is named, a clean point is VALID."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.runs import PROMPT_TOKENS, Point, config_row, rounds, write_run

from pytest_ppsweep.results.aggregate import load_run, summarize_run
from pytest_ppsweep.results.verdict import Verdict, as_bool, judge

GOOD = Point("good", 8, 4, 4, 8, 8800.0, 13.5, 16.4)
BAD = Point("bad", 4, 8, 4, 8, 7100.0, 17.3, 18.6)


def _verdicts(tmp_path: Path, bad_rows: list[dict[str, Any]] | None = None,
              bad_config: dict[str, Any] | None = None, configs: list[dict[str, Any]] | None = None,
              **meta: Any) -> dict[str, Verdict]:
    rows = rounds(GOOD) + (rounds(BAD) if bad_rows is None else bad_rows)
    if configs is None:
        configs = [config_row("good", 8, 4, 4, 0, 79_000),
                   config_row("bad", 4, 8, 4, 1, 82_000, **(bad_config or {}))]
    run = write_run(tmp_path / "run", rows, configs, baseline="good", **meta)
    data = load_run(run)
    return {v.config_id: v for v in judge(data, summarize_run(data))}


def _edit(rows: list[dict[str, Any]], repeat: int, **changes: Any) -> list[dict[str, Any]]:
    for row in rows:
        if row["repeat"] == repeat:
            row.update(changes)
    return rows


def test_clean_points_are_valid(tmp_path: Path) -> None:
    verdicts = _verdicts(tmp_path)
    assert all(v.valid and v.failures == () and v.text == "VALID" for v in verdicts.values())


def test_incomplete_round(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, _edit(rounds(BAD), 2, completed=39))["bad"]
    assert not v.valid
    assert v.failures == ("39/40 completed in repeat 2",)
    assert v.text == "INVALID: 39/40 completed in repeat 2"


def test_request_errors(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, _edit(rounds(BAD), 1, failed=2))["bad"]
    assert v.failures == ("2 failed request(s) in repeat 1",)


def test_prompt_tokens_differ(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, _edit(rounds(BAD), 3, input_tokens=PROMPT_TOKENS - 360))["bad"]
    assert v.failures == (f"server counted {PROMPT_TOKENS - 360:,} prompt tokens, "
                          f"sent {PROMPT_TOKENS:,} in repeat 3",)


def test_spread_above_threshold(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, rounds(BAD, jitter=0.0155))["bad"]
    assert v.failures == ("spread 3.1 % > 2.0 %",)


def test_spread_threshold_from_run_json(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, rounds(BAD, jitter=0.0155), spread_threshold=0.05)["bad"]
    assert v.valid


def test_spread_equal_at_one_decimal_prints_two(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, rounds(BAD, jitter=0.01015))["bad"]
    assert v.failures == ("spread 2.03 % > 2.00 %",)


def test_too_few_repeats(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, rounds(BAD, repeats=2))["bad"]
    assert v.failures == ("2 repeat(s) < 3 required",)
    assert _verdicts(tmp_path, rounds(BAD, repeats=2), min_repeats=2)["bad"].valid


def test_log_scan_findings(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, bad_config={"log_clean": False,
                                        "log_findings": "node1.log:88 CUDA out of memory"})["bad"]
    assert v.failures == ("log scan: node1.log:88 CUDA out of memory",)


def test_topology_not_as_requested(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, bad_config={"topology_ok": False})["bad"]
    assert v.failures == ("topology not as requested",)


def test_boot_failure_without_rounds(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, [], bad_config={"boot_ok": False,
                                            "boot_error": "watchdog timeout after 300 s"})["bad"]
    assert v.failures == ("boot failed: watchdog timeout after 300 s", "no rounds at C=8")


def test_missing_configs_row_and_unrecorded_checks(tmp_path: Path) -> None:
    configs = [config_row("good", 8, 4, 4, 0, 79_000, log_clean="")]
    verdicts = _verdicts(tmp_path, configs=configs)
    assert verdicts["bad"].failures == ("no configs.csv row",)
    assert verdicts["good"].failures == ("log scan not recorded",)


def test_several_failures_are_all_named(tmp_path: Path) -> None:
    rows = _edit(rounds(BAD, jitter=0.0155), 2, completed=39)
    v = _verdicts(tmp_path, rows)["bad"]
    assert v.text == "INVALID: 39/40 completed in repeat 2; spread 3.1 % > 2.0 %"


def test_every_concurrency_of_the_run_is_judged(tmp_path: Path) -> None:
    # C=16 is in the manifest but was never measured: both configs are invalid there.
    rows = rounds(GOOD) + rounds(BAD)
    configs = [config_row("good", 8, 4, 4, 0, 79_000), config_row("bad", 4, 8, 4, 1, 82_000)]
    workload = {"concurrency": [8, 16], "num_requests": 40}  # as plugin's run.json has it
    data = load_run(write_run(tmp_path / "run", rows, configs, workload=workload))
    verdicts = judge(data, summarize_run(data))
    assert [(v.config_id, v.concurrency, v.valid) for v in verdicts] == [
        ("good", 8, True), ("good", 16, False), ("bad", 8, True), ("bad", 16, False)]
    assert verdicts[1].failures == ("no rounds at C=16",)


@pytest.mark.parametrize(("raw", "expected"), [
    (True, True), (False, False), ("True", True), ("false", False), (1, True), (0.0, False),
    ("", False), (float("nan"), None), (None, None), ("maybe", None),
])
def test_as_bool(raw: object, expected: bool | None) -> None:
    assert as_bool(raw) is expected
