"""The emulated model's greedy answer with logprobs (``/generate`` with ``return_logprob``).

A deterministic stand-in for a model's forward pass: each position's top candidates and their
logprobs are a CRC32 chain over the prompt and the tokens so far, so the same prompt gives the
same tokens on every layout, boot and run, as greedy decoding of one model does. Top-1 leads
top-2 by at least 0.5 nats (no near-ties: a divergence is always a fault).

Parallelism must not change outputs, but it changes the order of floating-point reductions: the
logprobs carry a layout-dependent jitter of at most ``JITTER_NATS`` (1e-3 per step of
``(pp·31 + tp·17 + ep) mod 7 − 3``), far inside the plugin's default tolerance (0.1 nats;
pytest_ppsweep/results/outputs.py), and never enough to reorder the candidates.

``corrupt_stage=K`` (sim/launch/faults.py) models a PP stage whose output is wrong (a dropped
layer, a bad kernel): every position's candidates come from another chain, so the layout's
tokens differ from the first position on. It applies only to a layout that has stage K.
"""

from __future__ import annotations

import zlib

JITTER_NATS = 0.003
_STRIDE = 7919  # a prime: a position's candidates are distinct for a vocab it does not divide


def prompt_seed(text: str | None, ids: list[int] | range | None) -> int:
    """The chain's start: the prompt's text, else its token ids."""
    key = text if text is not None else ",".join(str(t) for t in (ids or ()))
    return zlib.crc32(key.encode())


def layout_jitter(pp: int, tp: int, ep: int) -> float:
    """The logprob offset of a layout (see the module docstring)."""
    return ((pp * 31 + tp * 17 + ep) % 7 - 3) * 1e-3


def generate(
    seed: int, n: int, vocab: int, top_k: int, *, jitter: float = 0.0, corrupt: int | None = None
) -> list[tuple[int, float, list[tuple[float, int]]]]:
    """``n`` greedy positions: (token id, its logprob, the top ``top_k`` as (logprob, id))."""
    out = []
    state = seed ^ (0 if corrupt is None else 0x9E3779B9 * (corrupt + 1) & 0xFFFFFFFF)
    k = max(1, min(top_k, vocab))
    stride = _STRIDE if vocab % _STRIDE else 1
    for pos in range(n):
        h = zlib.crc32(f"{state}:{pos}".encode())
        first = -(0.05 + (h % 1000) / 1000.0)
        top: list[tuple[float, int]] = []
        lp = first
        for j in range(k):
            top.append((lp + jitter, (h + j * stride) % vocab))
            lp -= 0.5 + ((h >> (10 + j)) % 100) / 100.0
        tid = top[0][1]
        out.append((tid, top[0][0], top))
        state = h ^ tid
    return out
