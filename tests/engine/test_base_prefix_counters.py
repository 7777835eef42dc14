"""Each engine's prefix-cache counters, read from its metrics page: what a round's achieved
prefix hit rate is the deltas of (measure/bench.py)."""

from __future__ import annotations

from pytest_ppsweep.engine.base import counter_sum
from pytest_ppsweep.engine.sglang import ENGINE as SGLANG
from pytest_ppsweep.engine.vllm import ENGINE as VLLM

# SGLang 0.5.23's /metrics with --enable-metrics, its two counters as the tokenizer manager's
# collector writes them (metrics_collector.py): one sample per label set, a _created twin.
METRICS_PAGE = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m",is_streaming="true"} 2900.0
sglang:prompt_tokens_total{model_name="m",is_streaming="false"} 100.0
sglang:prompt_tokens_created{model_name="m",is_streaming="true"} 1.76e9
# HELP sglang:cached_tokens_total Number of cached prompt tokens by source (device/host/storage).
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="m",cache_source="device"} 1500.0
sglang:cached_tokens_total{model_name="m",cache_source="host"} 300.0
"""


def test_sglang_sums_every_label_set() -> None:
    assert SGLANG.prefix_counters(METRICS_PAGE) == (1800.0, 3000.0)


def test_no_cached_sample_yet_is_zero_and_no_counter_is_none() -> None:
    before_any_hit = METRICS_PAGE.split("sglang:cached_tokens_total{")[0]
    assert SGLANG.prefix_counters(before_any_hit) == (0.0, 3000.0)
    assert SGLANG.prefix_counters('{"detail": "Not Found"}') is None
    assert SGLANG.prefix_counters("# TYPE other_total counter\nother_total 3.0\n") is None


def test_a_declared_family_without_samples_is_zero_an_unknown_one_none() -> None:
    assert counter_sum("# TYPE a:b counter\n", "a:b_total") == 0.0
    assert counter_sum("a:b_total 2\na:b_total{x=\"1\"} 3.5\n", "a:b_total") == 5.5
    assert counter_sum("a:bc_total 2\n", "a:b_total") is None


def test_vllm_says_not_available_rather_than_guess() -> None:
    page = ("# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total 5.0\n"
            "# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total 9.0\n")
    assert VLLM.prefix_counters(page) is None
