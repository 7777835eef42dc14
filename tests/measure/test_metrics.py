"""Round metrics over hand-written records (no server)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_ppsweep.measure.metrics import ROW_KEYS, summarize


def rec(index: int, ok: bool, sent: float | None, done: float | None, *, ttft: float | None = None,
        prompt_len: int = 100, prompt_tokens: int | None = 100, kind: str | None = None,
        scale: float = 1.0) -> dict[str, Any]:
    """A record as bench.py writes it; times given in raw seconds, scaled by ``scale``."""
    def s(v: float | None) -> float | None:
        return None if v is None else v * scale

    e2e = None if sent is None or done is None else done - sent
    return {
        "index": index, "prompt_len": prompt_len, "ok": ok, "error_kind": kind,
        "sent_at_raw_s": sent, "done_at_raw_s": done, "sent_at_s": s(sent), "done_at_s": s(done),
        "ttft_raw_s": ttft, "ttft_s": s(ttft), "e2e_raw_s": e2e, "e2e_s": s(e2e),
        "prompt_tokens": prompt_tokens if ok else None, "completion_tokens": 1 if ok else None,
    }  # fmt: skip


def test_hand_computed_round() -> None:
    records = [
        rec(0, True, 0.0, 1.0, ttft=0.9, prompt_len=100, prompt_tokens=100),
        rec(1, True, 0.0, 2.0, ttft=1.9, prompt_len=200, prompt_tokens=210),
        rec(2, True, 1.0, 3.0, ttft=1.5, prompt_len=300, prompt_tokens=300),
        rec(3, True, 2.0, 4.0, ttft=1.0, prompt_len=400, prompt_tokens=400),
        rec(4, False, 1.5, 5.0, kind="timeout", prompt_len=999),  # last end counts in duration
        rec(5, False, None, None, kind="round timeout"),  # never sent: not in duration
    ]
    r = summarize(records, peak_concurrency=2, prompt_digest="abc", concurrency=2)
    assert (r.num_requests, r.completed, r.failed) == (6, 4, 2)
    assert r.duration_s == pytest.approx(5.0)  # first send 0.0 → last end 5.0
    assert r.input_tokens == 1010  # server-counted, completed only
    assert r.input_tokens_nominal == 1000  # sent lengths, completed only (999 excluded)
    assert r.input_tps == pytest.approx(202.0)
    assert r.input_tps_nominal == pytest.approx(200.0)
    assert r.output_tokens == 4
    # ttfts sorted: 0.9, 1.0, 1.5, 1.9 → linear interpolation at rank q/100*(n-1).
    assert r.ttft_mean_s == pytest.approx(1.325)
    assert r.ttft_p50_s == pytest.approx(1.25)
    assert r.ttft_p95_s == pytest.approx(1.5 + 0.85 * 0.4)
    assert r.ttft_p99_s == pytest.approx(1.5 + 0.97 * 0.4)
    # e2e: 1, 2, 2, 2.
    assert r.e2e_mean_s == pytest.approx(1.75)
    assert r.e2e_p50_s == pytest.approx(2.0)
    assert r.e2e_p99_s == pytest.approx(2.0)
    assert r.errors == {"timeout": 1, "round timeout": 1}
    assert r.peak_concurrency == 2
    assert len(r.records) == 6


def test_scaled_records_give_scaled_metrics() -> None:
    raw = [rec(0, True, 0.0, 0.5, ttft=0.25), rec(1, True, 0.25, 1.0, ttft=0.5)]
    scaled = [rec(0, True, 0.0, 0.5, ttft=0.25, scale=100), rec(1, True, 0.25, 1.0, ttft=0.5,
                                                                  scale=100)]
    a = summarize(raw, peak_concurrency=1, prompt_digest="d")
    b = summarize(scaled, peak_concurrency=1, prompt_digest="d", time_scale=100)
    assert b.duration_s == pytest.approx(100 * a.duration_s)
    assert b.duration_raw_s == pytest.approx(a.duration_raw_s)
    assert b.ttft_p99_s == pytest.approx(100 * a.ttft_p99_s)
    assert b.input_tps == pytest.approx(a.input_tps / 100)


def test_as_row_has_exact_keys_and_builtins_only() -> None:
    r = summarize([rec(0, True, 0.0, 1.0, ttft=0.5)], peak_concurrency=1, prompt_digest="d",
                  output_len=1)
    row = r.as_row()
    assert tuple(row) == ROW_KEYS
    assert set(row) == {
        "num_requests", "completed", "failed", "duration_s", "input_tokens",
        "input_tokens_nominal", "input_tps", "input_tps_nominal", "output_tokens", "ttft_mean_s",
        "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "e2e_mean_s", "e2e_p50_s", "e2e_p99_s",
        "peak_concurrency", "prompt_digest", "tpot_mean_s", "tpot_p50_s", "tpot_p99_s",
        "itl_mean_s", "itl_p50_s", "itl_p99_s", "output_tps", "output_tokens_nominal",
        "hit_rate_implied", "hit_rate_achieved", "hit_rate_source", "hit_rate_tolerance",
    }  # fmt: skip
    # a one-token answer has no TPOT/ITL (None), random-ids prompts no hit rate (None);
    # everything else is a builtin
    assert all(row[k] is None for k in row if k.startswith("hit_rate_"))
    assert all(type(v) in (int, float, str, bool) for k, v in row.items()
               if not k.startswith(("tpot_", "itl_", "hit_rate_")))


def test_nothing_completed_gives_none_statistics() -> None:
    records = [rec(i, False, 0.0, 1.0, kind="http 503") for i in range(3)]
    row = summarize(records, peak_concurrency=3, prompt_digest="d").as_row()
    assert row["completed"] == 0
    assert row["failed"] == 3
    assert row["ttft_p50_s"] is None
    assert row["e2e_mean_s"] is None
    assert row["input_tps"] == 0.0  # the service did no work in a measured second
    empty = summarize([], num_requests=0, peak_concurrency=0, prompt_digest="d").as_row()
    assert empty["duration_s"] == 0.0
    assert empty["input_tps"] is None  # no time elapsed: undefined, not zero


def test_missing_server_count_makes_input_tokens_unknown() -> None:
    records = [rec(0, True, 0.0, 1.0, ttft=0.5), rec(1, True, 0.0, 1.0, ttft=0.5,
                                                     prompt_tokens=None)]
    r = summarize(records, peak_concurrency=2, prompt_digest="d")
    assert r.input_tokens is None
    assert r.as_row()["input_tps"] is None
    assert r.input_tokens_nominal == 200
