"""Workload generation: bench_serving's random-ids, seeded, digested, serialised once."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest

from pytest_ppsweep.measure.workload import WorkloadSpec, generate_prompts, prompt_digest

SpecFactory = Callable[..., WorkloadSpec]


def test_ids_follow_bench_serving_formula(make_spec: SpecFactory) -> None:
    prompts = generate_prompts(make_spec(vocab_size=50, input_len=120))
    for p in prompts.prompts:
        # Reference: bench_serving's list comprehension, including wrap-around past vocab_size.
        assert p.ids() == [(p.offset + p.index + j) % 50 for j in range(p.length)]


def test_lengths_are_drawn_within_the_range_ratio(make_spec: SpecFactory) -> None:
    spec = make_spec(input_len=100, range_ratio=0.25, num_requests=200)
    lengths = [p.length for p in generate_prompts(spec).prompts]
    assert min(lengths) >= 25
    assert max(lengths) <= 100
    assert len(set(lengths)) > 10  # actually random, not a constant
    exact = generate_prompts(make_spec(input_len=100, range_ratio=1.0)).prompts
    assert {p.length for p in exact} == {100}
    tiny = generate_prompts(make_spec(input_len=3, range_ratio=0.0, num_requests=50)).prompts
    assert min(p.length for p in tiny) >= 1  # the lower bound is clamped to 1, as bench_serving


def test_digest_is_stable_and_depends_on_content(make_spec: SpecFactory) -> None:
    first, second = generate_prompts(make_spec()), generate_prompts(make_spec())
    assert first.digest == second.digest
    assert first.prompts == second.prompts
    assert first.digest == prompt_digest(first.prompts)
    assert len(first.digest) == 64
    assert generate_prompts(make_spec(seed=8)).digest != first.digest
    assert generate_prompts(make_spec(input_len=65)).digest != first.digest
    # Output length, API and timeouts do not change the prompts, so neither does the digest.
    other = make_spec(output_len=4, api="completions", request_timeout_s=1.0)
    assert generate_prompts(other).digest == first.digest


def test_warmup_prompts_are_their_own_and_first_ids_are_distinct(make_spec: SpecFactory) -> None:
    prompts = generate_prompts(make_spec(warmup_requests=3, num_requests=30, vocab_size=40))
    assert len(prompts.warmup) == 3
    measured = {tuple(p.ids()) for p in prompts.prompts}
    assert all(tuple(w.ids()) not in measured for w in prompts.warmup)
    # No two prompts share a first id, hence no shared radix-cache prefix.
    firsts = [p.ids()[0] for p in (*prompts.prompts, *prompts.warmup)]
    assert len(set(firsts)) == len(firsts)


def test_bodies_are_serialised_once_per_api(make_spec: SpecFactory) -> None:
    spec = make_spec(output_len=3)
    prompts = generate_prompts(spec)
    bodies = prompts.bodies(spec, None)
    assert prompts.bodies(spec, None) is bodies  # cached, not rebuilt per round
    assert json.loads(bodies[0]) == {
        "input_ids": prompts.prompts[0].ids(),
        "sampling_params": {"max_new_tokens": 3, "ignore_eos": True, "temperature": 0.0},
        "stream": True,
    }
    comp = make_spec(output_len=3, api="completions")
    body = json.loads(prompts.bodies(comp, "m", warmup=True)[0])
    assert body == {
        "model": "m", "prompt": prompts.warmup[0].ids(), "max_tokens": 3, "temperature": 0,
        "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
    }  # fmt: skip
    with pytest.raises(ValueError, match="model"):
        prompts.bodies(comp, None)


@pytest.mark.parametrize(
    "override",
    [{"range_ratio": 1.5}, {"api": "chat"}, {"input_len": 0}, {"request_rate": 0.0},
     {"num_requests": 2000}, {"round_timeout_s": -1.0}],
)  # fmt: skip
def test_invalid_specs_are_rejected(make_spec: SpecFactory, override: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="invalid WorkloadSpec"):
        make_spec(**override)


def test_defaults_match_the_seed_workload() -> None:
    spec = WorkloadSpec(16384, 1, 1.0, 40, 1, 163840)
    assert spec.warmup_requests == 1
    assert spec.api == "generate"
    assert math.isinf(spec.request_rate)
    prompts = generate_prompts(spec)
    assert {p.length for p in prompts.prompts} == {16384}
    assert len(prompts.bodies(spec, None)) == 40
