"""Mooncake-format traces and shared-prefix workloads: equal hash blocks are equal token blocks,
the hit rate the sharing implies, the replay schedule, and a trace file checked line by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.paths import DATA

from pytest_ppsweep.measure.tracereplay import (
    Trace,
    TraceError,
    TraceRequest,
    check_hit_rate,
    read_trace,
    shared_prefix_trace,
)

SMALL = DATA / "mooncake" / "small.jsonl"


def test_the_shipped_trace_reads_and_its_blocks_are_shared_token_for_token() -> None:
    tr = read_trace(SMALL)
    assert len(tr.requests) == 24 and tr.block_size == 512
    # request 0's conversation goes on later: that turn starts with request 0's block
    first = tr.requests[0]
    nxt = next(i for i, r in enumerate(tr.requests) if i and r.hash_ids[0] == first.hash_ids[0])
    turn = tr.requests[nxt]
    assert turn.hash_ids[: len(first.hash_ids)] == first.hash_ids
    a, b = tr.prompt_ids(0, 32000, seed=1), tr.prompt_ids(nxt, 32000, seed=1)
    assert len(a) == first.input_length and len(b) == turn.input_length
    assert b[: len(a)] == a  # the earlier turn's whole prompt is the later one's prefix
    # a one-off request shares nothing with the conversation before it
    one_off = next(i for i, r in enumerate(tr.requests) if i and r.hash_ids[0] not in
                   {q.hash_ids[0] for q in tr.requests[:i]})
    assert tr.prompt_ids(one_off, 32000, 1)[:16] != a[:16]
    # the same seed gives the same tokens; another seed, other tokens
    assert tr.prompt_ids(0, 32000, 1) == a and tr.prompt_ids(0, 32000, 2) != a


def test_the_implied_hit_rate_counts_the_longest_shared_prefix() -> None:
    r = [TraceRequest(0, 600, 1, (1, 2)),     # nothing before it
         TraceRequest(1, 1100, 1, (1, 2, 3)),  # shares 600 tokens (all of request 0)
         TraceRequest(2, 300, 1, (1,)),         # shares 300 (its whole prompt: 299 computed-free)
         TraceRequest(3, 512, 1, (9,))]         # nothing
    tr = Trace("t", tuple(r), block_size=512)
    assert tr.implied_hit_rate() == pytest.approx((600 + 299) / (600 + 1100 + 300 + 512))
    assert read_trace(SMALL).implied_hit_rate() == pytest.approx(0.6031, abs=1e-4)


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 1.0])
def test_a_shared_prefix_workload_implies_its_stated_share(share: float) -> None:
    tr = shared_prefix_trace(40, 1024, 8, prefix_len=768, share=share, block_size=64)
    # the first sharing request pays for the prefix; every later one hits its 768 tokens
    sharing = round(share * 40)
    expected = max(sharing - 1, 0) * 768 / (40 * 1024)
    assert tr.implied_hit_rate() == pytest.approx(expected)
    # spread evenly: each half of the round holds half of the sharing requests
    firsts = [r.hash_ids[0] == 0 for r in tr.requests]
    assert abs(sum(firsts[:20]) - sum(firsts[20:])) <= 1


def test_the_schedule_replays_timestamps_slowed_or_at_a_rate() -> None:
    tr = read_trace(SMALL)
    own = tr.schedule()
    assert own[0] == 0.0 and own == sorted(own)
    assert own[-1] == pytest.approx((tr.requests[-1].timestamp_ms - tr.requests[0].timestamp_ms)
                                    / 1000)
    assert tr.schedule(slowdown=2.0)[-1] == pytest.approx(2 * own[-1])
    at_rate = tr.schedule(request_rate=4.0, seed=3)
    assert len(at_rate) == 24 and at_rate != own
    with pytest.raises(ValueError, match="slowdown"):
        tr.schedule(slowdown=0)


def test_the_achieved_hit_rate_is_held_against_the_implied_one() -> None:
    good = check_hit_rate(0.60, cached_tokens_delta=18_500, prompt_tokens_delta=31_435)
    assert good.ok and "within" in good.text()
    off = check_hit_rate(0.60, cached_tokens_delta=3_000, prompt_tokens_delta=31_435)
    assert not off.ok and "OFF by more than" in off.text()
    none = check_hit_rate(0.60, cached_tokens_delta=None, prompt_tokens_delta=31_435)
    assert not none.ok and "not verified" in none.text()


@pytest.mark.parametrize(("line", "message"), [
    ('{"timestamp": 0, "input_length": 10, "output_length": 1}',
     "line 2: missing key hash_ids"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]}',
     r"line 2: hash_ids: expected 2 \(input_length 600 in blocks of 512\), found 1"),
    ('{"timestamp": -5, "input_length": 10, "output_length": 1, "hash_ids": [1]}',
     "line 2: timestamp: expected ms ≥ 0, found -5"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []}',
     "line 2: input_length: expected an integer ≥ 1, found 0"),
    ("not json", "line 2: expected a JSON object"),
])
def test_a_bad_line_is_refused_naming_file_line_and_key(tmp_path: Path, line: str,
                                                        message: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps({"timestamp": 0, "input_length": 10, "output_length": 1,
                             "hash_ids": [0]}) + "\n" + line + "\n")
    with pytest.raises(TraceError, match=message) as info:
        read_trace(f)
    assert str(f) in str(info.value)


def test_timestamps_that_go_back_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"timestamp": 9, "input_length": 1, "output_length": 1, "hash_ids": [0]}\n'
                 '{"timestamp": 3, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n')
    with pytest.raises(TraceError, match="line 2: timestamp: expected ≥ the line before's 9"):
        read_trace(f)
    with pytest.raises(TraceError, match="no such trace file"):
        read_trace(tmp_path / "missing.jsonl")
