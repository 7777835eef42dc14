"""The ``[correctness]`` table of a sweep file: the outputs probe of every layout.

While a layout is up, a few fixed prompts go to ``/generate`` with greedy sampling and
``return_logprob``; the tokens and top logprobs are stored per layout and compared across the
layouts of the sweep and with the gate's reference run (results/outputs.py holds the rule).

Keys (all optional; the probe is on by default):

| key | meaning | default |
|---|---|---|
| ``enabled`` | run the probe (``test_outputs_match``); ``false`` turns it off | true |
| ``prompts`` | the prompts: each a string (text) or a list of token ids | 4 short texts |
| ``max_new_tokens`` | tokens generated per prompt (greedy, ``ignore_eos``) | 8 |
| ``top_logprobs`` | top logprobs kept per position (``top_logprobs_num``) | 5 |
| ``logprob_tolerance`` | how far a matched token's logprob may move (nats) | 0.1 |
| ``tie_margin`` | reference top-1 − top-2 below this: a near-tie (nats) | 2 × tolerance |
| ``timeout_s`` | per request (real seconds) | 120 |
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_ppsweep.matrix.schema import INT_LIMIT, MatrixError, Reader, shown_value

__all__ = ["CORRECTNESS_KEYS", "DEFAULT_PROMPTS", "CorrectnessSpec", "Prompt",
           "read_correctness"]

CORRECTNESS_KEYS = ("enabled", "prompts", "max_new_tokens", "top_logprobs",
                    "logprob_tolerance", "tie_margin", "timeout_s")
# Short prompts any tokenizer takes (the tiny provisioned models' too): a few tokens each, so
# the probe stays a small fraction of a layout's time (benchmarks/bench_correctness_probe.py).
DEFAULT_PROMPTS: tuple[str, ...] = (
    "The capital of France is",
    "1, 2, 3, 4, 5,",
    "def fibonacci(n):",
    "The quick brown fox",
)
# Nats. SGLang's own HF-vs-SRT test of bf16 models allows 5e-2 on prefill and 6e-2 on decode
# logprobs (test/srt/models/test_generation_models.py, ModelCase); 0.1 leaves room for fp8 GEMMs.
DEFAULT_LOGPROB_TOLERANCE = 0.1

# A prompt as sent: text, or token ids (``input_ids``).
Prompt = str | tuple[int, ...]


@dataclass(frozen=True)
class CorrectnessSpec:
    """What the outputs probe sends to each layout and how its answers are compared."""

    enabled: bool = True
    prompts: tuple[Prompt, ...] = DEFAULT_PROMPTS
    max_new_tokens: int = 8
    top_logprobs: int = 5
    logprob_tolerance: float = DEFAULT_LOGPROB_TOLERANCE
    tie_margin: float = 2 * DEFAULT_LOGPROB_TOLERANCE
    timeout_s: float = 120.0


def _prompts(c: Reader) -> tuple[Prompt, ...]:
    raw = c.raw("prompts")
    where = f"{c.path}: key 'correctness.prompts"
    if not isinstance(raw, list) or not raw:
        raise MatrixError(f"{where}': expected a non-empty list of prompts (strings or lists of "
                          f"token ids), found {shown_value(raw)}")
    out: list[Prompt] = []
    for i, item in enumerate(raw):
        if isinstance(item, str) and item and "\x00" not in item:
            out.append(item)
        elif (isinstance(item, list) and item and all(
                isinstance(t, int) and not isinstance(t, bool) and 0 <= t < INT_LIMIT
                for t in item)):
            out.append(tuple(item))
        else:
            raise MatrixError(f"{where}[{i}]': expected a non-empty string or a non-empty list "
                              f"of token ids (integers ≥ 0), found {shown_value(item)}")
    return tuple(out)


def read_correctness(top: Reader) -> CorrectnessSpec:
    """The ``[correctness]`` table, validated; the defaults when the file has none."""
    if "correctness" not in top.data:
        return CorrectnessSpec()
    c = top.table("correctness")
    c.only(CORRECTNESS_KEYS)
    tolerance = c.number("logprob_tolerance", default=DEFAULT_LOGPROB_TOLERANCE, minimum=0.0)
    return CorrectnessSpec(
        enabled=c.flag("enabled", default=True),
        prompts=_prompts(c) if "prompts" in c.data else DEFAULT_PROMPTS,
        max_new_tokens=c.integer("max_new_tokens", default=8, minimum=1, maximum=4096),
        top_logprobs=c.integer("top_logprobs", default=5, minimum=2, maximum=100),
        logprob_tolerance=tolerance,
        tie_margin=c.number("tie_margin", default=2 * tolerance, minimum=0.0),
        timeout_s=c.number("timeout_s", default=120.0, minimum=0.1),
    )
