"""A trace or shared-prefix round: the trace's prompts, output lengths and arrivals sent, and the
server's achieved prefix hit rate read as counter deltas over the measured requests (else the
requests' own cached_tokens, else "not measured"), held against the implied rate."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from support.paths import DATA

from pytest_ppsweep.measure.bench import run_round_sync
from pytest_ppsweep.measure.completion import HIT_RATE, result_problems, row_problems
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.measure.tracereplay import Trace, read_trace, shared_prefix_trace
from pytest_ppsweep.measure.workload import PromptSet, WorkloadSpec, trace_prompts

if TYPE_CHECKING:  # a fixture type only
    from support.fakes import FakeSGLang

SpecFactory = Callable[..., WorkloadSpec]

SMALL = DATA / "mooncake" / "small.jsonl"
SLOWDOWN = 0.05  # the trace's 6 s in 0.3 s


def _trace_round(fake: FakeSGLang, make_spec: SpecFactory,
                 hits_unmeasured: str | None = None) -> tuple[Trace, PromptSet, RoundResult]:
    trace = read_trace(SMALL)
    spec = make_spec(num_requests=len(trace.requests), input_len=512, output_len=1,
                     vocab_size=32000)
    prompts = trace_prompts(spec, trace, slowdown=SLOWDOWN, hit_tolerance=0.02)
    return trace, prompts, run_round_sync(fake.base_url, prompts, 1, spec=spec,
                                          hits_unmeasured=hits_unmeasured)


def test_a_trace_round_sends_the_trace_and_reads_the_hit_rate_from_counter_deltas(
        fake_server: FakeSGLang, make_spec: SpecFactory) -> None:
    fake_server.prefix_cache = fake_server.metrics = True
    fake_server.delay_s = 0.005
    trace, _prompts, result = _trace_round(fake_server, make_spec)
    # each request's own prompt (equal blocks equal tokens), output length and arrival
    sent = fake_server.ids_sent()[-len(trace.requests):]
    assert [len(ids) for ids in sent] == [r.input_length for r in trace.requests]
    assert sent == [trace.prompt_ids(i, 32000, 7) for i in range(len(trace.requests))]
    asked = [b["sampling_params"]["max_new_tokens"] for b in fake_server.bodies[-24:]]
    assert asked == [r.output_length for r in trace.requests]
    assert result.output_tokens_nominal == trace.output_tokens == result.output_tokens
    due = sorted(r["scheduled_at_s"] for r in result.records)
    assert due == pytest.approx(trace.schedule(slowdown=SLOWDOWN))
    # the warm-up's tokens are in the counters too, but not in the round's deltas
    assert fake_server.prompt_total > trace.input_tokens
    assert result.hit_rate_source == "server counters"
    assert result.hit_rate_implied == pytest.approx(0.6031, abs=1e-4)
    assert result.hit_rate_achieved == pytest.approx(result.hit_rate_implied, abs=0.002)
    assert result_problems(result) == []
    row = result.as_row()
    assert (row["hit_rate_source"], row["hit_rate_tolerance"]) == ("server counters", 0.02)


def test_without_metrics_the_requests_own_cached_tokens_give_the_rate(
        fake_server: FakeSGLang, make_spec: SpecFactory) -> None:
    fake_server.prefix_cache, fake_server.delay_s = True, 0.005
    _, _, result = _trace_round(fake_server, make_spec)
    assert result.hit_rate_source == "per-request cached_tokens"
    assert result.hit_rate_achieved == pytest.approx(result.hit_rate_implied, abs=0.002)


def test_a_server_without_a_prefix_cache_is_not_measured_never_a_number(
        fake_server: FakeSGLang, make_spec: SpecFactory) -> None:
    fake_server.delay_s = 0.005
    _, _, result = _trace_round(fake_server, make_spec,
                                hits_unmeasured="the emulator has no prefix cache")
    assert result.hit_rate_achieved is None
    assert result.hit_rate_source == "not measured: the emulator has no prefix cache"
    assert result_problems(result) == []  # said so, not excluded


def test_a_round_whose_cache_missed_is_flagged_and_not_counted(
        fake_server: FakeSGLang, make_spec: SpecFactory) -> None:
    fake_server.metrics, fake_server.delay_s = True, 0.005  # metrics on, no cache hits
    _, _, result = _trace_round(fake_server, make_spec)
    assert (result.hit_rate_source, result.hit_rate_achieved) == ("server counters", 0.0)
    problems = result_problems(result)
    assert [p.kind for p in problems] == [HIT_RATE]
    assert "0.0% achieved, 60.3% implied: OFF by more than ±2.0%" in str(problems[0])
    # the same rule on the round's results.csv row (strings, as csv reads them)
    row = {k: "" if v is None else str(v) for k, v in result.as_row().items()}
    assert [p.kind for p in row_problems(row)] == [HIT_RATE]
    assert row_problems(row | {"hit_rate_achieved": ""}) == []  # not measured: counts


def test_a_shared_prefix_round_achieves_its_stated_share(
        fake_server: FakeSGLang, make_spec: SpecFactory) -> None:
    fake_server.prefix_cache = fake_server.metrics = True
    fake_server.delay_s = 0.002
    spec = make_spec(num_requests=10, input_len=256, output_len=2)
    trace = shared_prefix_trace(10, 256, 2, prefix_len=192, share=0.8, block_size=192)
    prompts = trace_prompts(spec, trace, replay=False, hit_tolerance=0.01)
    # 8 of 10 share 192 of 256 tokens; the first of them finds nothing cached yet
    assert prompts.implied_hit_rate == pytest.approx(7 * 192 / (10 * 256))
    result = run_round_sync(fake_server.base_url, prompts, 1, spec=spec)
    assert result.hit_rate_achieved == pytest.approx(prompts.implied_hit_rate, abs=0.005)
    assert result_problems(result) == []
