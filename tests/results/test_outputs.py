"""The outputs agreement rule (results/outputs.py) and the [correctness] table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_ppsweep.matrix.correctnessspec import DEFAULT_PROMPTS, read_correctness
from pytest_ppsweep.matrix.schema import MatrixError, Reader
from pytest_ppsweep.results.outputs import (
    LayoutOutputs,
    PromptOutput,
    compare_prompt,
    outputs_problems,
    read_outputs,
    reference_layout,
)
from pytest_ppsweep.run.outputs_step import generate_body, prompt_output


def out(ids: list[int], lps: list[float], gaps: list[float] | None = None,
        prompt: str = "p") -> PromptOutput:
    """Top-2 of each position: the token, then token+100 ``gap`` nats lower."""
    gaps = gaps or [1.0] * len(ids)
    top = tuple(((t, lp), (t + 100, lp - g)) for t, lp, g in zip(ids, lps, gaps, strict=True))
    return PromptOutput(prompt, tuple(ids), tuple(lps), top)


RULE = {"tolerance": 0.1, "tie_margin": 0.2}


def test_same_tokens_within_tolerance_agree() -> None:
    assert compare_prompt(out([1, 2, 3], [-0.1, -0.2, -0.3]),
                          out([1, 2, 3], [-0.15, -0.25, -0.22]), 0, **RULE) is None


def test_a_logprob_beyond_tolerance_is_named() -> None:
    d = compare_prompt(out([1, 2, 3], [-0.1, -0.2, -0.3]),
                       out([1, 2, 3], [-0.1, -0.2, -0.5]), 0, **RULE)
    assert d is not None and d.position == 2 and d.token == d.ref_token == 3
    assert "0.2000 apart > tolerance 0.1" in d.message("pp2", "pp1")


def test_a_token_flip_without_a_near_tie_is_named() -> None:
    d = compare_prompt(out([1, 2, 3], [-0.1, -0.2, -0.3]),
                       out([1, 9, 3], [-0.1, -0.25, -0.3]), 4, **RULE)
    assert d is not None and (d.position, d.ref_token, d.token) == (1, 2, 9)
    text = d.message("pp4-tp2", "pp1-tp8")
    assert text.startswith("pp4-tp2: prompt 4 'p': first differing position 1: token 9 "
                           "(logprob -0.2500) vs token 2 (logprob -0.2000) in pp1-tp8")
    assert "not a near-tie" in text


def test_a_flip_after_a_near_tie_is_allowed_and_ends_the_comparison() -> None:
    ref = out([1, 2, 3, 4], [-0.1, -0.7, -0.3, -0.4], gaps=[1.0, 0.05, 1.0, 1.0])
    # position 1: ref's top-2 is 102 at -0.75 (a near-tie); the other side took it
    got = PromptOutput("p", (1, 102, 7, 8), (-0.1, -0.7, -5.0, -5.0),
                       (((1, -0.1),), ((102, -0.7), (2, -0.72)), ((7, -5.0),), ((8, -5.0),)))
    assert compare_prompt(ref, got, 0, **RULE) is None
    # the same flip where the other's token is not in the reference's top logprobs
    far = PromptOutput("p", (1, 55, 7), (-0.1, -0.7, -5.0),
                       (((1, -0.1),), ((55, -0.7), (2, -0.72)), ((7, -5.0),)))
    d = compare_prompt(ref, far, 0, **RULE)
    assert d is not None and "not in each other's top logprobs" in d.why


def _write(run: Path, cid: str, prompts: list[PromptOutput]) -> None:
    LayoutOutputs(cid, tuple(prompts), 0.1, 0.2).write(run)


def test_problems_against_the_baseline_and_the_gate_reference(tmp_path: Path) -> None:
    run, ref = tmp_path / "run", tmp_path / "ref"
    for folder in (run, ref):
        (folder / "metadata").mkdir(parents=True)
        (folder / "metadata" / "run.json").write_text(json.dumps(
            {"baseline": "pp1", "order": ["pp1", "pp2", "pp4"]}))
    good = [out([1, 2], [-0.1, -0.2], prompt="a"), out([5, 6], [-0.1, -0.2], prompt="b")]
    _write(run, "pp2", good)
    assert reference_layout(run) == "pp2"  # the baseline has no outputs yet: the first that has
    _write(run, "pp1", good)
    assert reference_layout(run) == "pp1"
    _write(run, "pp4", [good[0], out([5, 7], [-0.1, -0.2], prompt="b")])
    assert outputs_problems(run, "pp2") == []
    bad = outputs_problems(run, "pp4")
    assert len(bad) == 1 and bad[0].startswith("pp4: prompt 1 'b': first differing position 1: "
                                               "token 7") and "pp1 (this run's reference" in bad[0]
    # the gate: the reference run's layout of the same id, else its reference layout
    _write(ref, "pp1", [out([1, 3], [-0.1, -0.2], prompt="a")])
    gate = outputs_problems(run, "pp2", ref)
    assert len(gate) == 1 and "pp1 of the reference run ref" in gate[0]
    assert outputs_problems(run, "pp8") == [
        f"pp8: no outputs recorded ({run / 'outputs' / 'pp8.json'})"]
    again = read_outputs(run, "pp4")
    assert again is not None and again.prompts[1].ids == (5, 7)


def test_generate_body_and_answer_shapes() -> None:
    from pytest_ppsweep.matrix.correctnessspec import CorrectnessSpec

    spec = CorrectnessSpec(max_new_tokens=3, top_logprobs=2)
    body = generate_body(spec, (1, 2, 3))
    assert body["input_ids"] == [1, 2, 3] and body["return_logprob"] is True
    assert body["sampling_params"]["temperature"] == 0.0 and body["top_logprobs_num"] == 2
    answer = {"output_ids": [7, 8], "meta_info": {
        "output_token_logprobs": [[-0.1, 7, None], [-0.3, 8, None]],
        "output_top_logprobs": [[[-0.1, 7, None], [-2.0, 9, None]],
                                [[-0.3, 8, None], [-1.0, 4, None]]]}}
    got = prompt_output("x", answer)
    assert got.ids == (7, 8) and got.logprobs == (-0.1, -0.3)
    assert got.top[1] == ((8, -0.3), (4, -1.0))


def test_correctness_table(tmp_path: Path) -> None:
    assert read_correctness(Reader(tmp_path, {}, "")).prompts == DEFAULT_PROMPTS
    spec = read_correctness(Reader(tmp_path, {"correctness": {
        "enabled": False, "prompts": ["hi", [1, 2]], "logprob_tolerance": 0.05}}, ""))
    assert not spec.enabled and spec.prompts == ("hi", (1, 2)) and spec.tie_margin == 0.1
    with pytest.raises(MatrixError, match=r"correctness.prompts\[1\]': expected a non-empty"):
        read_correctness(Reader(tmp_path, {"correctness": {"prompts": ["a", []]}}, ""))
    with pytest.raises(MatrixError, match=r"unknown|expected one of"):
        read_correctness(Reader(tmp_path, {"correctness": {"promts": ["a"]}}, ""))
