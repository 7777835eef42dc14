"""Decode metrics (TPOT, ITL, output TPS) over hand-written streams, computed by hand here.

Each record is what bench.py writes: ``chunk_s`` the arrival (after the send) of every event that
carried output, ``chunk_tokens`` the server's cumulative completion count at that event.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from pytest_ppsweep.folder.runfolder import RESULT_COLUMNS, RunStore
from pytest_ppsweep.measure.metrics import ROW_KEYS, request_itls, request_tpot, summarize
from pytest_ppsweep.results.aggregate import load_run, summarize_run

DECODE_KEYS = ("tpot_mean_s", "tpot_p50_s", "tpot_p99_s", "itl_mean_s", "itl_p50_s",
               "itl_p99_s", "output_tps")  # fmt: skip


def stream(
    index: int,
    sent: float,
    chunks: list[float],
    counts: list[int | None],
    *,
    done_after: float,
    ok: bool = True,
    completion_tokens: int | None = None,
) -> dict[str, Any]:
    """A completed (or failed) streamed request; ``done_after`` = send → data: [DONE]."""
    tokens = completion_tokens if completion_tokens is not None else counts[-1]
    return {
        "index": index, "prompt_len": 10, "prompt_tokens": 10, "ok": ok,
        "error_kind": None if ok else "timeout",
        "sent_at_s": sent, "done_at_s": sent + done_after, "sent_at_raw_s": sent,
        "done_at_raw_s": sent + done_after, "ttft_s": chunks[0] if chunks else None,
        "e2e_s": done_after, "completion_tokens": tokens if ok else None,
        "chunk_s": chunks, "chunk_tokens": counts,
    }  # fmt: skip


def test_tpot_is_decode_time_over_tokens_after_the_first() -> None:
    # 5 tokens, first at 1.0 s, [DONE] at 3.0 s: (3.0 - 1.0) / (5 - 1) = 0.5 s
    r = stream(0, 0.0, [1.0, 1.5, 2.0, 2.5, 3.0], [1, 2, 3, 4, 5], done_after=3.0)
    assert request_tpot(r) == pytest.approx(0.5)
    one = stream(1, 0.0, [1.0], [1], done_after=1.0)
    assert request_tpot(one) is None  # a 1-token answer has no TPOT (bench_serving: > 1)
    failed = stream(2, 0.0, [1.0, 2.0], [1, 2], done_after=2.0, ok=False)
    assert request_tpot(failed) is None


def test_itl_spreads_a_multi_token_chunk_and_skips_empty_events() -> None:
    # first event (2 tokens) is TTFT's; then +1 after 0.2 s; an event adding nothing (skipped);
    # then +3 at 0.9 s: 0.9 - 0.3 = 0.6 s spread over 3 tokens = 0.2 s each.
    r = stream(0, 0.0, [0.1, 0.3, 0.5, 0.9], [2, 3, 3, 6], done_after=1.0)
    assert request_itls(r) == pytest.approx([0.2, 0.2, 0.2, 0.2])
    no_counts = stream(
        1, 0.0, [0.1, 0.4, 1.0], [None, None, None], done_after=1.0, completion_tokens=3
    )
    assert request_itls(no_counts) == pytest.approx([0.3, 0.6])  # one token per event
    mixed = stream(2, 0.0, [0.1, 0.4, 1.0], [None, None, 9], done_after=1.0)
    assert request_itls(mixed) == pytest.approx([0.3, 0.6])  # count only on the last event


def test_round_decode_statistics_by_hand() -> None:
    records = [
        # A: 4 tokens, TTFT 1.0, [DONE] 2.2 → TPOT 1.2/3 = 0.4; ITLs 0.2, 0.4, 0.6
        stream(0, 0.0, [1.0, 1.2, 1.6, 2.2], [1, 2, 3, 4], done_after=2.2),
        # B: 3 tokens, TTFT 0.5, [DONE] 1.5 (last event at 1.5) → TPOT 1.0/2 = 0.5;
        #    ITLs: +2 tokens after 1.0 s → 0.5, 0.5
        stream(1, 1.0, [0.5, 1.5], [1, 3], done_after=1.5),
        # C: one token: no TPOT, no ITL, but its token counts in output TPS
        stream(2, 2.0, [0.7], [1], done_after=0.8),
        # D: failed: counts nowhere
        stream(3, 0.0, [0.1, 0.2, 9.0], [1, 2, 3], done_after=4.0, ok=False),
    ]
    r = summarize(records, peak_concurrency=2, prompt_digest="d")
    assert r.tpot_mean_s == pytest.approx(0.45)
    assert r.tpot_p50_s == pytest.approx(0.45)
    assert r.tpot_p99_s == pytest.approx(0.4 + 0.99 * 0.1)
    # pooled ITLs sorted: 0.2, 0.4, 0.5, 0.5, 0.6 → mean 2.2/5; p50 = 0.5;
    # p99 at rank 0.99 * 4 = 3.96 → 0.5 + 0.96 * 0.1
    assert r.itl_mean_s == pytest.approx(0.44)
    assert r.itl_p50_s == pytest.approx(0.5)
    assert r.itl_p99_s == pytest.approx(0.596)
    # output tokens 4 + 3 + 1 = 8 over first send 0.0 → last end 4.0 (D's end counts)
    assert r.output_tokens == 8
    assert r.duration_s == pytest.approx(4.0)
    assert r.output_tps == pytest.approx(2.0)
    assert r.e2e_mean_s == pytest.approx((2.2 + 1.5 + 0.8) / 3)


def test_nothing_to_decode_gives_none() -> None:
    r = summarize(
        [stream(0, 0.0, [0.7], [1], done_after=0.8)], peak_concurrency=1, prompt_digest="d"
    )
    row = r.as_row()
    assert all(row[k] is None for k in DECODE_KEYS if k != "output_tps")
    assert row["output_tps"] == pytest.approx(1 / 0.8)
    assert set(DECODE_KEYS) <= set(ROW_KEYS)


def test_decode_columns_flow_into_the_run_folder_and_old_readers(tmp_path: Path) -> None:
    records = [stream(0, 0.0, [1.0, 1.2, 1.6, 2.2], [1, 2, 3, 4], done_after=2.2)]
    row = summarize(records, peak_concurrency=1, prompt_digest="d").as_row()
    store = RunStore(tmp_path, "run-1")
    store.write_json("metadata/run.json", {"run_id": "run-1", "order": ["pp1-tp1-ep1"]})
    store.update_config("pp1-tp1-ep1", pp=1, tp=1, ep=1, order=0, boot_ok=True)
    store.append_result(
        {"run_id": "run-1", "config_id": "pp1-tp1-ep1", "concurrency": 1, "repeat": 1, **row}
    )
    with store.results_csv.open(newline="") as fh:
        got = next(csv.DictReader(fh))
    assert set(DECODE_KEYS) <= set(RESULT_COLUMNS)
    assert float(got["tpot_mean_s"]) == pytest.approx(0.4)
    assert float(got["itl_p50_s"]) == pytest.approx(0.4)
    assert float(got["output_tps"]) == pytest.approx(4 / 2.2, rel=1e-5)
    run = load_run(store.dir)  # the results layer reads the new columns
    assert run.results["tpot_mean_s"].iloc[0] == pytest.approx(0.4)
    summary = summarize_run(run)  # and the existing medians are untouched by them
    assert summary.table["ttft_p50_s"].iloc[0] == pytest.approx(1.0)


def test_a_results_csv_of_an_older_runstore_keeps_its_header(tmp_path: Path) -> None:
    store = RunStore(tmp_path, "old-1")
    old = [c for c in RESULT_COLUMNS if c not in DECODE_KEYS]
    store.results_csv.write_text(",".join(old) + "\n", encoding="utf-8")
    row = summarize(
        [stream(0, 0.0, [1.0, 2.0], [1, 2], done_after=2.0)], peak_concurrency=1, prompt_digest="d"
    ).as_row()
    store.append_result(
        {"run_id": "old-1", "config_id": "pp1-tp1-ep1", "concurrency": 1, "repeat": 1, **row}
    )
    with store.results_csv.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == old and None not in rows[0]  # no cell shifted under an old name
    assert float(rows[0]["ttft_mean_s"]) == pytest.approx(1.0)
