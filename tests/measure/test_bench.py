"""Rounds over real HTTP against the fake SGLang server in conftest.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep.measure.arrivals import lag, schedule
from pytest_ppsweep.measure.bench import (
    RECORD_KEYS,
    BenchSetupError,
    make_session,
    run_round,
)
from pytest_ppsweep.measure.bench import run_round_sync as run
from pytest_ppsweep.measure.workload import PromptSet, WorkloadSpec, generate_prompts

if TYPE_CHECKING:  # a fixture type only; importing conftest at run time is fragile
    from support.fakes import FakeSGLang

SpecFactory = Callable[..., WorkloadSpec]


def first_id(prompts: PromptSet, index: int) -> int:
    return int(prompts.prompts[index].ids()[0])


def test_clean_round_and_records(fake_server: FakeSGLang, make_spec: SpecFactory) -> None:
    spec = make_spec(num_requests=6)
    prompts = generate_prompts(spec)
    seen: list[dict[str, Any]] = []
    r = run(fake_server.base_url, prompts, 2, spec=spec, on_record=seen.append)
    assert (r.completed, r.failed, dict(r.errors)) == (6, 0, {})
    assert sorted(x["index"] for x in seen) == list(range(6))  # streamed as they complete
    assert all(set(x) == set(RECORD_KEYS) for x in seen)
    json.dumps(seen)  # builtins only: the caller writes them as JSONL
    assert r.input_tokens == r.input_tokens_nominal == 6 * 64
    assert r.output_tokens == 6
    assert all(x["server_e2e_latency"] == 0.5 and x["finish_reason"] == "length" for x in seen)
    assert r.prompt_digest == prompts.digest
    assert r.duration_s > 0
    assert r.ttft_p50_s > 0
    assert fake_server.events[0] == ("flush", [])  # flush, then warmup, then measured


def test_each_failure_kind_is_a_failed_request_with_its_reason(
    fake_server: FakeSGLang, make_spec: SpecFactory
) -> None:
    spec = make_spec(num_requests=9, request_timeout_s=0.5)
    prompts = generate_prompts(spec)
    modes = ["ok", "stream_error", "cut", "no_done", "no_final", "http_500", "hang", "abort", "ok"]
    fake_server.modes = {first_id(prompts, i): m for i, m in enumerate(modes)}
    r = run(fake_server.base_url, prompts, 9, spec=spec)
    by_index = {x["index"]: x for x in r.records}
    expected = {
        "ok": (True, None), "stream_error": (False, "stream error"),
        "cut": (False, "truncated stream"), "no_done": (False, "truncated stream"),
        "no_final": (False, "truncated stream"), "http_500": (False, "http 500"),
        "hang": (False, "timeout"), "abort": (False, "aborted"),
    }  # fmt: skip
    for i, mode in enumerate(modes):
        got = by_index[i]
        assert (got["ok"], got["error_kind"]) == expected[mode], (mode, got["error"])
        assert (got["error"] is None) == got["ok"]
    assert "boom in stream" in by_index[1]["error"]
    assert "internal" in by_index[5]["error"]  # the body text travels with the status
    assert by_index[5]["http_status"] == 500
    assert (r.completed, r.failed) == (2, 7)
    assert r.errors == {"stream error": 1, "truncated stream": 3, "http 500": 1, "timeout": 1,
                        "aborted": 1}  # fmt: skip
    assert by_index[6]["e2e_raw_s"] == pytest.approx(0.5, abs=0.3)


def test_connection_refused(refused_url: str, make_spec: SpecFactory) -> None:
    spec = make_spec(num_requests=3)
    r = run(refused_url, generate_prompts(spec), 2, spec=spec, flush_cache=False)
    assert r.failed == 3
    assert r.errors == {"connection error": 3}
    assert all("connection error" in x["error"] for x in r.records)
    with pytest.raises(BenchSetupError, match="flush_cache"):
        run(refused_url, generate_prompts(spec), 2, spec=spec)


def test_empty_text_first_chunk_still_gives_a_positive_ttft(
    fake_server: FakeSGLang, make_spec: SpecFactory
) -> None:
    fake_server.default_mode = "empty_text"
    spec = make_spec(num_requests=4)
    r = run(fake_server.base_url, generate_prompts(spec), 2, spec=spec)
    assert r.completed == 4
    assert all(x["ttft_s"] > 0 for x in r.records)  # bench_serving would record 0.0 here
    assert r.ttft_mean_s >= fake_server.delay_s


# Not named "concurrency": the plugin parametrises any test that asks for that fixture name.
@pytest.mark.parametrize("limit", [1, 3])
def test_peak_concurrency_never_exceeds_c(
    fake_server: FakeSGLang, make_spec: SpecFactory, limit: int
) -> None:
    spec = make_spec(num_requests=12)
    r = run(fake_server.base_url, generate_prompts(spec), limit, spec=spec)
    assert r.completed == 12
    assert r.peak_concurrency == limit  # all arrive at t=0: the semaphore is saturated
    assert 1 <= fake_server.peak <= limit  # counted by the server itself


def test_same_prompts_across_concurrency_and_repeats(
    fake_server: FakeSGLang, make_spec: SpecFactory
) -> None:
    spec = make_spec(num_requests=5)
    digests, sent = set(), []
    for limit in (1, 4, 4):
        fake_server.events.clear()
        r = run(fake_server.base_url, generate_prompts(spec), limit, spec=spec)
        digests.add(r.prompt_digest)
        ids = fake_server.ids_sent()[spec.warmup_requests:]
        sent.append(hashlib.sha256(json.dumps(sorted(ids)).encode()).hexdigest())
    assert len(digests) == 1
    assert len(set(sent)) == 1  # what reached the server is identical too


def test_warmup_is_distinct_and_excluded(fake_server: FakeSGLang, make_spec: SpecFactory) -> None:
    spec = make_spec(num_requests=4, warmup_requests=2)
    prompts = generate_prompts(spec)
    r = run(fake_server.base_url, prompts, 2, spec=spec)
    received = fake_server.ids_sent()
    assert len(received) == 6
    measured = [p.ids() for p in prompts.prompts]
    assert received[:2] == [w.ids() for w in prompts.warmup]  # warmup first, after the flush
    assert all(w not in measured for w in received[:2])
    assert r.num_requests == 4
    assert len(r.records) == 4
    assert len(r.warmup_records) == 2
    assert all(x["ok"] for x in r.warmup_records)


def test_flush_retries_while_busy_then_gives_up(
    fake_server: FakeSGLang, make_spec: SpecFactory
) -> None:
    spec = make_spec(num_requests=2)
    fake_server.flush_busy = 2
    assert run(fake_server.base_url, generate_prompts(spec), 1, spec=spec).completed == 2
    assert [e for e, _ in fake_server.events].count("flush") == 3
    fake_server.flush_busy = 1000
    t = time.monotonic()
    with pytest.raises(BenchSetupError, match="HTTP 400"):
        run(fake_server.base_url, generate_prompts(spec), 1, spec=spec, flush_timeout_s=0.5)
    assert time.monotonic() - t < 3


def test_time_scale_multiplies_every_duration(
    fake_server: FakeSGLang, make_spec: SpecFactory
) -> None:
    fake_server.delay_s = 0.05
    spec = make_spec(num_requests=3)
    r = run(fake_server.base_url, generate_prompts(spec), 3, spec=spec, time_scale=100.0)
    for x in r.records:
        assert x["ttft_raw_s"] >= 0.05
        assert x["ttft_s"] == pytest.approx(100 * x["ttft_raw_s"])
        assert x["e2e_s"] == pytest.approx(100 * x["e2e_raw_s"])
    assert r.duration_s == pytest.approx(100 * r.duration_raw_s)
    assert r.ttft_p50_s >= 5.0
    assert r.input_tps_nominal == pytest.approx(3 * 64 / r.duration_s)


def test_completions_api(fake_server: FakeSGLang, make_spec: SpecFactory) -> None:
    spec = make_spec(num_requests=3, api="completions", output_len=2)
    prompts = generate_prompts(spec)
    r = run(fake_server.base_url, prompts, 2, spec=spec)
    assert r.completed == 3
    assert r.input_tokens == 3 * 64  # from the usage chunk
    assert r.output_tokens == 6
    body = fake_server.bodies[-1]
    assert body["model"] == "fake-model"  # discovered via /v1/models
    assert body["stream_options"] == {"include_usage": True}
    assert len(fake_server.ids_sent("completions")) == 4  # 1 warmup + 3
    assert all(x["cached_tokens"] == 0 for x in r.records)


def test_round_timeout_bounds_the_time(fake_server: FakeSGLang, make_spec: SpecFactory) -> None:
    spec = make_spec(num_requests=6, round_timeout_s=0.5, request_timeout_s=30.0)
    prompts = generate_prompts(spec)
    fake_server.modes = {first_id(prompts, i): "hang" for i in range(6)}
    t = time.monotonic()
    r = run(fake_server.base_url, prompts, 2, spec=spec)
    assert time.monotonic() - t < 3
    assert r.errors == {"round timeout": 6}
    assert sum(x["send_ts"] is not None for x in r.records) == 2  # 2 in flight, 4 never sent
    assert r.duration_raw_s == pytest.approx(0.5, abs=0.3)
    assert math.isnan(r.ttft_mean_s)


def test_poisson_arrivals_and_caller_session(
    fake_server: FakeSGLang, make_spec: SpecFactory
) -> None:
    spec = make_spec(num_requests=6, request_rate=40.0)

    async def go() -> Any:
        async with make_session(8) as session:
            return await run_round(fake_server.base_url, generate_prompts(spec), 8, spec=spec,
                                   session=session)

    r = asyncio.run(go())
    assert r.completed == 6
    arrivals = schedule(6, 40.0, seed=spec.seed)  # seeded: the same schedule every run
    assert arrivals == schedule(6, 40.0, seed=spec.seed)
    assert arrivals[0] == 0.0
    assert arrivals[-1] > 0.0
    for x in r.records:  # nobody is sent before its arrival time; each records when it was due
        assert x["scheduled_at_raw_s"] == arrivals[x["index"]]
        assert x["sent_at_raw_s"] >= x["issued_at_raw_s"] >= arrivals[x["index"]] - 0.01
    behind = lag(r.records)
    assert behind is not None and not behind.behind, behind


def test_the_cap_delays_sends_not_arrivals(fake_server: FakeSGLang,
                                           make_spec: SpecFactory) -> None:
    """bench_serving's --max-concurrency with a rate: a request due while the cap is full is
    issued on time and sent when a slot frees; that wait is not the client falling behind."""
    spec = make_spec(num_requests=6, request_rate=1000.0)
    r = run(fake_server.base_url, generate_prompts(spec), 1, spec=spec)
    assert r.completed == 6 and r.peak_concurrency == 1
    waits = [x["sent_at_raw_s"] - x["issued_at_raw_s"] for x in r.records]
    assert max(waits) > 0.001  # queued behind the cap of 1
    assert all(x["issued_at_raw_s"] - x["scheduled_at_raw_s"] < 0.05 for x in r.records)


def test_mismatched_spec_or_small_pool_is_refused(make_spec: SpecFactory) -> None:
    prompts = generate_prompts(make_spec())
    with pytest.raises(ValueError, match="does not describe"):
        run("http://127.0.8.1:1", prompts, 1, spec=make_spec(seed=99))

    async def small_pool() -> None:
        async with make_session(2) as session:
            await run_round("http://127.0.8.1:1", prompts, 4, spec=make_spec(), session=session)

    with pytest.raises(ValueError, match="connector limit"):
        asyncio.run(small_pool())


def test_an_engine_without_a_cache_flush_is_not_flushed(
    fake_server: FakeSGLang, make_spec: SpecFactory
) -> None:
    """An engine with no flush endpoint (vLLM outside development mode) runs its rounds with no
    flush at all, also when the round can be cancelled (the engine travels with the round)."""
    import dataclasses
    import threading

    from pytest_ppsweep.engine.sglang import ENGINE

    engine = dataclasses.replace(ENGINE, endpoints=dataclasses.replace(ENGINE.endpoints,
                                                                        flush_cache=""))
    spec = make_spec(num_requests=4)
    r = run(fake_server.base_url, generate_prompts(spec), 2, spec=spec, engine=engine,
            cancel=threading.Event())
    assert (r.completed, r.failed) == (4, 0)
    assert fake_server.events and "flush" not in {route for route, _ in fake_server.events}
