"""The emulator's greedy answer with logprobs: tokens from the prompt, the same on every layout
(a logprob jitter well inside the plugin's tolerance), SGLang's meta_info shapes, and the
corrupt_stage fault."""

from __future__ import annotations

import json
from typing import Any

from support.sim import ClusterFactory, http

from pytest_ppsweep.sim.launch.faults import parse_faults
from pytest_ppsweep.sim.model import greedy

BODY: dict[str, Any] = {
    "text": "The capital of France is",
    "sampling_params": {"temperature": 0.0, "max_new_tokens": 6, "ignore_eos": True},
    "return_logprob": True, "logprob_start_len": -1, "top_logprobs_num": 3,
}  # fmt: skip


def test_generate_depends_on_the_prompt_not_the_layout() -> None:
    seed = greedy.prompt_seed("hello world", None)
    a = greedy.generate(seed, 8, 256, 5, jitter=greedy.layout_jitter(1, 8, 1))
    b = greedy.generate(seed, 8, 256, 5, jitter=greedy.layout_jitter(4, 2, 2))
    assert [t for t, _, _ in a] == [t for t, _, _ in b]
    assert all(abs(x[1] - y[1]) <= 2 * greedy.JITTER_NATS + 1e-9 for x, y in zip(a, b, strict=True))
    other = greedy.generate(greedy.prompt_seed("hello there", None), 8, 256, 5)
    assert [t for t, _, _ in other] != [t for t, _, _ in a]
    for tid, lp, top in a:
        assert top[0] == (lp, tid) and len({t for _, t in top}) == 5
        assert top[0][0] - top[1][0] >= 0.5  # no near-ties in the emulated model
    corrupt = greedy.generate(seed, 8, 256, 5, corrupt=1)
    assert corrupt[0][0] != a[0][0]


def test_corrupt_stage_fault_parses() -> None:
    fault = parse_faults("corrupt_stage=1").get("corrupt_stage")
    assert fault is not None and fault.number() == 1


def _answer(c: Any) -> dict[str, Any]:
    status, body, _ = http("POST", c.base_url + "/generate", BODY)
    assert status == 200, body
    return dict(json.loads(body))


def test_layouts_agree_and_a_corrupted_stage_does_not(cluster: ClusterFactory) -> None:
    tp2 = cluster(1, ["--tp-size", "2"])
    fault = {"PPSWEEP_SIM_FAULTS": "corrupt_stage=1"}
    pp2 = cluster(2, ["--pp-size", "2", "--tp-size", "2"], env=fault)
    pp1_fault = cluster(1, ["--tp-size", "2"], env=fault)
    for c in (tp2, pp2, pp1_fault):
        c.wait_healthy(30)
    good, bad, unaffected = _answer(tp2), _answer(pp2), _answer(pp1_fault)
    meta = good["meta_info"]
    # SGLang 0.5.23's shapes: [logprob, token_id, text|null] per token; per position a list
    assert len(good["output_ids"]) == 6 and meta["output_token_logprobs_length"] == 6
    assert [t[1] for t in meta["output_token_logprobs"]] == good["output_ids"]
    assert all(t[2] is None for t in meta["output_token_logprobs"])
    assert [len(p) for p in meta["output_top_logprobs"]] == [3] * 6
    assert [p[0][1] for p in meta["output_top_logprobs"]] == good["output_ids"]
    assert unaffected["output_ids"] == good["output_ids"]  # pp1 has no stage 1
    assert bad["output_ids"][0] != good["output_ids"][0]


def _complete(c: Any, prompt: Any, **extra: Any) -> str:
    body = {"model": "m", "prompt": prompt, "max_tokens": 5, **extra}
    status, raw, _ = http("POST", c.base_url + "/v1/completions", body)
    assert status == 200, raw
    return str(json.loads(raw)["choices"][0]["text"])


def test_a_greedy_completion_is_the_prompts_and_a_corrupted_stage_changes_it(
        cluster: ClusterFactory) -> None:
    """The accuracy check's answers: /v1/completions at temperature 0 is the prompt's greedy
    text on every layout (a one-element prompt list too), cut before a stop string; the
    corrupt_stage fault changes it on a layout with that stage."""
    tp2 = cluster(1, ["--tp-size", "2"])
    pp2 = cluster(2, ["--pp-size", "2", "--tp-size", "2"],
                  env={"PPSWEEP_SIM_FAULTS": "corrupt_stage=1"})
    for c in (tp2, pp2):
        c.wait_healthy(30)
    good = _complete(tp2, "Question: 2+2=", temperature=0)
    assert good == _complete(tp2, ["Question: 2+2="], temperature=0.0)
    assert len(good.split()) == 5 and good.startswith(" ")
    second = good.split()[1]
    assert _complete(tp2, "Question: 2+2=", temperature=0, stop=[" " + second]) == (
        " " + good.split()[0])
    assert _complete(pp2, "Question: 2+2=", temperature=0) != good  # stage 1 corrupted
