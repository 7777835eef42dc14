"""measure/overload.py: an open-loop probe that the server could not keep up with is overloaded
(at or above the saturation rate, a delivered rate short of the offered one beyond its noise,
waits that grow through the probe), and measure/withinslo.py never calls it within."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pytest_ppsweep.matrix.slospec import SloLimit, SloSpec
from pytest_ppsweep.measure.metrics import summarize
from pytest_ppsweep.measure.overload import min_requests, overload
from pytest_ppsweep.measure.withinslo import evaluate

S = 16384 / 8800  # the seeds' PP8: 1.86 s of prefill a request at saturation
T0 = 8.1  # its TTFT with no queue (a pipeline holds several prompts)


def fifo(rate: float, n: int, seed: int, service: float = S) -> list[dict[str, Any]]:
    """``n`` Poisson arrivals at ``rate`` into an empty FIFO server of ``service`` s a request
    behind a fixed latency: the records a probe writes (scaled seconds)."""
    rng = random.Random(seed)
    t = free = 0.0
    out = []
    for i in range(n):
        free = max(t, free) + service
        ttft = free - t + (T0 - service)
        out.append({"index": i, "ok": True, "prompt_len": 100, "scheduled_at_s": t,
                    "sent_at_s": t, "ttft_s": ttft, "e2e_s": ttft, "done_at_s": t + ttft,
                    "sent_at_raw_s": t, "done_at_raw_s": t + ttft, "prompt_tokens": 100,
                    "completion_tokens": 1, "chunk_s": [ttft], "chunk_tokens": [1]})
        t += rng.expovariate(rate)
    return out


def share(rho: float, n: int, seeds: int = 200) -> float:
    return sum(overload(fifo(rho / S, n, seed), rho / S, None, 0.1).overloaded
               for seed in range(seeds)) / seeds


def test_the_floor_is_where_a_25_pct_overload_shows() -> None:
    assert min_requests() == 69
    assert min_requests(0.5) < 69 < min_requests(0.1)
    with pytest.raises(ValueError, match="margin must be > 0"):
        min_requests(0.0)


def test_a_stable_queue_is_rarely_overloaded_and_an_overloaded_one_mostly_is() -> None:
    # below capacity, near it too, the tests almost never fire (a false alarm only makes a probe
    # outside: conservative); above it by half or more, nearly always at the floor's size
    assert share(0.5, 200) == 0.0
    assert share(0.84, 198) <= 0.02
    assert share(0.84, 69) <= 0.05
    assert share(1.5, 69) >= 0.9
    assert share(1.25, 198) >= 0.9
    assert share(2.6, 69) == 1.0


def test_seven_requests_above_capacity_only_the_saturation_rule_catches() -> None:
    """The overclaim: 7 requests at 1.4 req/s into 0.54 req/s meet TTFT p50 ≤ 20 s, and the
    delivered rate over 6 gaps is too noisy to tell; the saturation rate says it."""
    records = fifo(1.4, 7, 3)
    caught = sum(overload(fifo(1.4, 7, seed), 1.4, None, 0.1).overloaded for seed in range(200))
    assert caught < 120  # most such probes pass both tests unseen
    assert overload(records, 1.4, None, 0.1).growth is None  # too few requests for a trend
    ruled = overload(records, 1.4, 1 / S, 0.1)
    assert ruled.overloaded and ruled.above_saturation
    assert ruled.reasons()[0].startswith("overloaded: 1.4 req/s is at or above the layout's "
                                         "saturation rate 0.537 req/s")
    assert overload(records, 0.537, 0.537, 0.1).above_saturation  # at it: no steady state


def test_an_overloaded_probe_is_never_within_and_counts_as_all_over() -> None:
    slo = SloSpec(limits=(SloLimit("ttft", 50, 20.0),), search="rate", low=0.05, high=2.0,
                  precision=0.05)
    records = fifo(1.4, 7, 3)
    result = summarize(records, peak_concurrency=7, prompt_digest="x")
    plain = evaluate(result, slo)
    assert plain.within and plain.overload is None  # what the search claimed before
    verdict = evaluate(result, slo, 1.4, 1 / S)
    assert not verdict.within and verdict.overloaded
    assert any(r.startswith("overloaded: ") for r in verdict.reasons)
    assert verdict.over["ttft_p50_s"] == (7, 7)  # every judged request over
    # a long probe above capacity: the delivered rate and the trend say it without the rule
    long = summarize(fifo(1.4, 69, 3), peak_concurrency=69, prompt_digest="x")
    seen = evaluate(long, slo, 1.4, None)
    assert seen.overloaded and not seen.within
    assert sum(r.startswith("overloaded: ") for r in seen.reasons) == 2, seen.reasons
    # below saturation and stable: within, no overload
    calm = evaluate(summarize(fifo(0.2, 69, 3), peak_concurrency=69, prompt_digest="x"), slo,
                    0.2, 1 / S)
    assert calm.within and calm.overload is not None and not calm.overloaded
