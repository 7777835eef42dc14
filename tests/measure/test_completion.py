"""The N/N rule is written once (measure.completion) and every user of it agrees: the test's
check, the verdict, the gate, benchmark.json and reuse count the same rounds."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.runs import NUM_REQUESTS, PROMPT_TOKENS, Point, config_row, rounds, write_run

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.gate.benchjson import benchmark_json, valid_mask
from pytest_ppsweep.gate.comparison import compare
from pytest_ppsweep.measure.completion import count, request_problem, round_problems, row_problems
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.pointchecks import completion_problems
from pytest_ppsweep.results.aggregate import load_run, round_counts, summarize_run
from pytest_ppsweep.results.verdict import judge

# case → (changes to repeat 2 of the point, whether that round counts)
CASES: dict[str, tuple[dict[str, Any], bool]] = {
    "complete": ({}, True),
    "one-failed": ({"completed": NUM_REQUESTS - 1, "failed": 1}, False),
    "fewer-completed": ({"completed": NUM_REQUESTS - 2}, False),
    "errors-counted": ({"failed": 2}, False),
    "zero-requests": ({"num_requests": 0, "completed": 0, "failed": 0}, False),
    "tokens-mismatch": ({"input_tokens": PROMPT_TOKENS - 360}, False),
    "tokens-missing": ({"input_tokens": None}, False),
    "completed-missing": ({"completed": None}, False),
    "more-completed": ({"completed": NUM_REQUESTS + 1}, False),
    "completion-tokens-over": ({"output_tokens": 3 * NUM_REQUESTS}, False),
    "completion-tokens-missing": ({"output_tokens": None}, False),
    "recorded-before-completion-check": ({"output_tokens_nominal": None}, True),
}
C = 8
WORKLOAD = {"workload": {"num_requests": NUM_REQUESTS, "repeats": 3, "concurrency": [C]}}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows, configs = [], []
    for order, (cid, (changes, _ok)) in enumerate(CASES.items()):
        point_rows = rounds(Point(cid, 8, 4, 4, C, 8800.0, 13.5, 16.4))
        point_rows[1].update(changes)
        rows += point_rows
        configs.append(config_row(cid, 8, 4, 4, order, 79_000))
    run_dir = write_run(tmp_path_factory.mktemp("rule") / "run", rows, configs,
                        baseline="complete")
    for cid in CASES:
        manifest.write(run_dir, cid, WORKLOAD)
    return run_dir


def _round(row: dict[str, Any]) -> RoundResult:
    return RoundResult(
        num_requests=row["num_requests"], completed=row["completed"], failed=row["failed"],
        duration_s=1.0, duration_raw_s=1.0, input_tokens=row["input_tokens"],
        input_tokens_nominal=row["input_tokens_nominal"], input_tps=1.0,
        input_tps_nominal=1.0, output_tokens=row.get("output_tokens"),
        output_tokens_nominal=row.get("output_tokens_nominal"), ttft_mean_s=1.0, ttft_p50_s=1.0,
        ttft_p95_s=1.0, ttft_p99_s=1.0, e2e_mean_s=1.0, e2e_p50_s=1.0, e2e_p99_s=1.0,
        peak_concurrency=C, prompt_digest="sha256:abc", errors=Counter(), concurrency=C)


def _expected() -> dict[str, bool]:
    return {cid: ok for cid, (_changes, ok) in CASES.items()}


def test_the_rule_itself() -> None:
    for cid, (changes, ok) in CASES.items():
        row = {**rounds(Point(cid, 8, 4, 4, C, 1.0, 1.0, 1.0), 1)[0], **changes}
        assert (not row_problems(row)) is ok, cid
    assert round_problems(40, 40, None, 10, 10) == []  # failed = N - completed when not recorded
    assert [p.text for p in round_problems(40, 39, 1, 9, 10)] == [
        "39/40 completed", "1 failed request(s)", "server counted 9 prompt tokens, sent 10"]
    assert [p.text for p in round_problems(40, 40, 0, 10, 10, 120, 40)] == [
        "server counted 120 completion tokens, asked 40"]
    assert request_problem(1, 3) == "asked 1 completion token(s), got 3"
    assert request_problem(1, 1) is None and request_problem(1, None) is None
    assert [count(v) for v in ("48", "48.0", "", "x", float("nan"), None, 3.5, 7)] == [
        48, 48, None, None, None, None, None, 7]


def test_every_user_of_the_rule_agrees(run: Path) -> None:
    expected = _expected()
    data = load_run(run)
    second = data.results[data.results["repeat"] == 2]

    by_frame = dict(zip(second["config_id"], round_counts(second), strict=True))
    by_mask = dict(zip(second["config_id"], valid_mask(second), strict=True))

    verdicts = {v.config_id: v for v in judge(data, summarize_run(data))}
    by_verdict = {cid: not any("in repeat 2" in f for f in v.failures)
                  for cid, v in verdicts.items()}

    benches = {b["extra_info"]["config_id"]: b for b in benchmark_json(run)["benchmarks"]}
    by_benchjson = {cid: 2 in benches[cid]["extra_info"]["repeats"] for cid in CASES}

    gate = compare(run, run)
    by_gate = {cid: not any(r.config_id == cid and r.verdict == "broken" for r in gate)
               for cid in CASES}

    by_reuse = {cid: manifest.reusable(run, cid, WORKLOAD)[0] for cid in CASES}

    by_check = {}
    for row in data.results.to_dict("records"):
        if row["repeat"] != 2 or any(count(row[k]) is None for k in ("completed", "failed")):
            continue  # a RoundResult always has its counts; the row adapters cover the rest
        r = _round({k: count(v) if k != "config_id" else v for k, v in row.items()})
        by_check[row["config_id"]] = not completion_problems(str(row["config_id"]), C, [r])

    assert by_frame == expected
    assert by_mask == expected
    assert by_verdict == expected
    assert {cid: v.valid for cid, v in verdicts.items()} == expected
    assert by_benchjson == expected
    assert by_gate == expected
    assert by_reuse == expected
    assert by_check == {cid: ok for cid, ok in expected.items() if cid != "completed-missing"}


def test_the_texts_name_the_same_reason(run: Path) -> None:
    data = load_run(run)
    verdicts = {v.config_id: v for v in judge(data, summarize_run(data))}
    assert verdicts["tokens-mismatch"].failures == (
        f"server counted {PROMPT_TOKENS - 360:,} prompt tokens, sent {PROMPT_TOKENS:,} "
        "in repeat 2",)
    assert verdicts["zero-requests"].failures == ("no requests sent (0) in repeat 2",)
    gate = {r.config_id: r.message for r in compare(run, run) if r.verdict == "broken"}
    assert gate["one-failed"].endswith("1 of 3 rounds not N/N: r2 39/40 (1 failed) — broken")
    assert "r2 40/40 (0 failed): server counted" in gate["tokens-mismatch"]
    row = {**rounds(Point("t", 8, 4, 4, C, 1.0, 1.0, 1.0), 1)[0],
           "input_tokens": PROMPT_TOKENS - 1}
    problems = completion_problems("t", C, [_round(row)])
    assert problems == [f"t C={C} repeat 1: server counted {PROMPT_TOKENS - 1:,} prompt tokens, "
                        f"sent {PROMPT_TOKENS:,}"]
