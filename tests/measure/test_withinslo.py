"""A round against an SLO (measure/withinslo.py): percentile limits, good requests, the N/N rule and
the client's schedule; goodput never counts a failure."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_ppsweep.matrix.slospec import SloLimit, SloSpec
from pytest_ppsweep.measure.metrics import summarize
from pytest_ppsweep.measure.withinslo import evaluate, judge_percentile, steady
from pytest_ppsweep.stats.binomial import binomial_bounds, dispersion


def rec(i: int, ttft: float, *, ok: bool = True, tokens: int = 1, e2e: float | None = None,
        due: float | None = None, issued: float | None = None) -> dict[str, Any]:
    e2e = ttft if e2e is None else e2e
    return {"index": i, "prompt_len": 100, "ok": ok, "ttft_s": ttft if ok else None,
            "e2e_s": e2e, "sent_at_s": float(i), "done_at_s": i + e2e, "sent_at_raw_s": float(i),
            "done_at_raw_s": i + e2e, "prompt_tokens": 100 if ok else None,
            "completion_tokens": tokens if ok else None, "chunk_s": [ttft] if ok else [],
            "chunk_tokens": [1] if ok else [], "error_kind": None if ok else "http 503",
            "scheduled_at_raw_s": due, "issued_at_raw_s": issued}


def result(records: list[dict[str, Any]]) -> Any:
    return summarize(records, peak_concurrency=1, prompt_digest="x")


P50 = SloSpec(limits=(SloLimit("ttft", 50, 2.0),))


def test_percentile_limits_hold_or_say_what_was_measured() -> None:
    ok = evaluate(result([rec(i, 1.0 + i / 10) for i in range(10)]), P50)
    assert ok.within and ok.reasons == () and ok.good == 10
    assert ok.observed["ttft_p50_s"] == 1.45
    slow = evaluate(result([rec(i, 2.0 + i / 10) for i in range(10)]), P50)
    assert not slow.within and len(slow.reasons) == 1
    # the first and the last request (10 % at each end) are the warm-up and the drain
    assert slow.reasons[0].startswith("TTFT p50 ≤ 2 s: measured 2.45 s (8 of 8 requests over 2 s")
    assert slow.unproven == ()


def test_a_failed_request_breaks_the_round_and_is_never_good() -> None:
    records = [rec(i, 0.5) for i in range(9)] + [rec(9, 0.5, ok=False)]
    both = SloSpec(limits=(SloLimit("ttft", 50, 2.0), SloLimit("ttft", None, 1.0)),
                   attainment=0.5)
    verdict = evaluate(result(records), both)
    assert not verdict.within and verdict.good == 9 and verdict.attainment == 0.9
    assert any("9/10 completed" in r for r in verdict.reasons)
    assert any("failed" in r for r in verdict.reasons)


def test_per_request_limits_count_good_requests_against_the_attainment() -> None:
    records = [rec(i, 0.5 if i < 7 else 3.0) for i in range(10)]
    spec = SloSpec(limits=(SloLimit("ttft", None, 1.0),), attainment=0.8)
    verdict = evaluate(result(records), spec)
    assert verdict.good == 7 and not verdict.within
    assert verdict.reasons == ("7/10 requests within TTFT per request ≤ 1 s (need 80%)",)
    assert verdict.goodput_rps == 7 / result(records).duration_s
    relaxed = SloSpec(limits=spec.limits, attainment=0.7)
    assert evaluate(result(records), relaxed).within


def test_a_client_behind_its_schedule_is_not_within() -> None:
    on_time = [rec(i, 0.5, due=i * 0.1, issued=i * 0.1 + 0.001) for i in range(20)]
    assert evaluate(result(on_time), P50).within
    late = [rec(i, 0.5, due=i * 0.1, issued=i * 0.15) for i in range(20)]
    verdict = evaluate(result(late), P50)
    assert not verdict.within and verdict.lag is not None and verdict.lag.behind
    assert "client behind its schedule" in verdict.reasons[-1]


def test_a_percentile_near_its_limit_is_unproven_not_within() -> None:
    """Issue 37 point 7: 17 of 40 over the p50 limit shows p50 below it (observed) but cannot
    prove it at 95 %: unproven, and an unproven probe is not within."""
    limit = SloLimit("ttft", 50, 2.0)
    values = [1.0] * 23 + [3.0] * 17
    state, words = judge_percentile(values, limit, 0.95)
    assert state == "unproven" and words.startswith("17 of 40 requests over 2 s")
    verdict = evaluate(result([rec(i, v) for i, v in enumerate(values)]), P50)
    assert verdict.observed["ttft_p50_s"] == 1.0  # the observed p50 is under the limit
    assert not verdict.within and verdict.unproven == ("ttft_p50_s",)
    assert verdict.reasons[0].startswith("TTFT p50 ≤ 2 s: unproven: measured 1 s (13 of 32 "
                                         "requests over 2 s")
    # the slow requests spread through the probe (every fourth): independent-looking
    assert judge_percentile([1.0, 1.0, 1.0, 3.0] * 10, limit, 0.95)[0] == "within"
    assert judge_percentile([3.0, 3.0, 3.0, 1.0] * 10, limit, 0.95)[0] == "outside"
    # a p99 over 40 requests can never be proven: the words say how many it needs
    state, words = judge_percentile([1.0] * 40, SloLimit("ttft", 99, 2.0), 0.95)
    assert state == "unproven" and "at least 299 requests are needed" in words


def test_the_warm_up_and_the_drain_are_left_out_of_the_percentiles() -> None:
    """Issue 37 point 7: the first arrivals meet an empty queue. 20 requests: the first 2 fast,
    then the queue holds every TTFT above the limit; untrimmed the p50 would still be over, but
    the share over the limit differs: 16 of 16 judged (trim 10 %), 18 of 20 untrimmed."""
    records = [rec(i, 0.5 if i < 2 else 3.0, due=float(i)) for i in range(20)]
    trimmed = evaluate(result(records), P50)
    assert trimmed.reasons[0].startswith("TTFT p50 ≤ 2 s: measured 3 s (16 of 16 requests")
    whole = evaluate(result(records), SloSpec(limits=P50.limits, trim=0.0))
    assert whole.reasons[0].startswith("TTFT p50 ≤ 2 s: measured 3 s (18 of 20 requests")
    assert trimmed.num_requests == whole.num_requests == 20  # N/N and goodput count them all
    # ordered by arrival, not by the order the records came back in
    assert [r["index"] for r in steady(list(reversed(records)), 0.1)] == list(range(2, 18))


def test_requests_that_come_in_runs_count_as_fewer_independent_ones() -> None:
    """Issue 37 point 7: a queue that is long stays long. 10 of 40 requests over the p50 limit,
    all in one run at the end: the independent-requests bound calls it within (the old rule),
    but batch means (6 batches of 6: five with none over, one all over) show the share varying
    7.2 × a binomial's: 40 requests count as 6, and the probe is unproven. The same 10 spread
    through the probe keep φ = 1 and stay within."""
    limit = SloLimit("ttft", 50, 2.0)
    runs = [1.0] * 30 + [3.0] * 10
    spread = [1.0, 1.0, 1.0, 3.0] * 10
    assert dispersion([v > 2.0 for v in spread]) == 1.0
    phi = dispersion([v > 2.0 for v in runs])
    assert phi == pytest.approx(7.2)
    assert binomial_bounds(10, 40, 0.95)[1] < 0.5  # the old rule: within
    state, words = judge_percentile(runs, limit, 0.95)
    assert state == "unproven", words
    assert "dispersion 7.2 (batch means): the 40 requests count as 6 independent" in words
    assert judge_percentile(spread, limit, 0.95)[0] == "within"
    # too few batches to see a variance, or no request over: φ = 1, the binomial's bound
    assert dispersion([False, True] * 10) == 1.0 and dispersion([False] * 100) == 1.0
    assert dispersion([True] * 4 + [False] * 12) == 1.0  # 4 batches of 4
    # a p90 over 100 requests, 5 over in one run: φ 5.3, 19 effective of the 29 it needs
    state, words = judge_percentile([1.0] * 95 + [3.0] * 5, SloLimit("ttft", 90, 2.0), 0.95)
    assert state == "unproven", words
    assert "(at least 29 requests are needed to prove it; about 153 at this dispersion)" in words
