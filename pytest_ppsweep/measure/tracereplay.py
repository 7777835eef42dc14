"""Production-shaped load: Mooncake-format traces and shared-prefix workloads, as prompts whose
sharing the server's prefix cache really sees, with the hit rate that sharing implies.

A Mooncake trace is JSONL, one request a line (its file format and line-by-line check:
:mod:`pytest_ppsweep.matrix.tracefile`, read when the sweep file is): ``timestamp`` (ms),
``input_length``, ``output_length`` and ``hash_ids``, one id per block of ``block_size`` input
tokens. Two requests that share a leading run of hash ids share that prefix.

Prompts are built so that **equal hash ids are equal token blocks**: block ``h`` is the ids drawn
from a generator seeded with ``(seed, 3, h)``, so a block means the same tokens in every request
and every run. A request's prompt is its blocks, cut to its input length.

The **implied hit rate** is what an unbounded prefix cache would serve from cache when the
requests come in trace order: per request, the tokens of its leading blocks that an earlier
request already sent. A server's achieved hit rate (its own counters' deltas over a round) is
held against it: a round that misses it by more than a tolerance is flagged, not averaged in
(:func:`check_hit_rate`).

The schedule replays the trace's own timestamps, slowed by ``slowdown`` (2.0: half the rate;
SGLang's ``--mooncake-slowdown-factor``), or, when a rate is given, the arrivals of
:func:`pytest_ppsweep.measure.arrivals.schedule` at that rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_ppsweep.matrix.tracefile import (
    MOONCAKE_BLOCK,
    TraceError,
    TraceRequest,
    read_requests,
    write_trace,
)
from pytest_ppsweep.measure.arrivals import schedule as rate_schedule

__all__ = ["MOONCAKE_BLOCK", "HitRateCheck", "Trace", "TraceError", "TraceRequest",
           "check_hit_rate", "read_trace", "shared_prefix_trace", "write_trace"]


@dataclass(frozen=True)
class Trace:
    """A whole trace, in arrival order, with the block size its hash ids stand for."""

    name: str
    requests: tuple[TraceRequest, ...]
    block_size: int = MOONCAKE_BLOCK

    def prompt_ids(self, index: int, vocab_size: int, seed: int) -> list[int]:
        """Request ``index``'s prompt: its blocks' ids, cut to its input length."""
        r = self.requests[index]
        blocks = [_block(h, self.block_size, vocab_size, seed) for h in r.hash_ids]
        ids: list[int] = np.concatenate(blocks)[: r.input_length].tolist()
        return ids

    def implied_hit_rate(self) -> float:
        """The share of input tokens an unbounded prefix cache serves from cache, requests in
        trace order: per request, its longest common token prefix with any earlier request
        (``min`` of their lengths where one request's blocks are all the other's leading ones),
        never its whole prompt (the last token is always computed)."""
        # covered[prefix]: the most tokens an earlier request had under this run of blocks
        covered: dict[tuple[int, ...], int] = {}
        cached = total = 0
        for r in self.requests:
            total += r.input_length
            best = 0
            prefix: tuple[int, ...] = ()
            for h in r.hash_ids:
                prefix = (*prefix, h)
                if prefix not in covered:
                    break
                best = covered[prefix]
            cached += min(best, r.input_length - 1)
            prefix = ()
            for depth, h in enumerate(r.hash_ids, 1):
                prefix = (*prefix, h)
                held = min(r.input_length, depth * self.block_size)
                covered[prefix] = max(covered.get(prefix, 0), held)
        return cached / total if total else 0.0

    def schedule(self, *, slowdown: float = 1.0, request_rate: float | None = None,
                 seed: int = 0, time_scale: float = 1.0) -> list[float]:
        """Each request's due offset from the round's start, in real seconds: the trace's own
        timestamps times ``slowdown``, or arrivals at ``request_rate`` (per scaled second)."""
        if request_rate is not None:
            return rate_schedule(len(self.requests), request_rate, seed=seed,
                                 time_scale=time_scale)
        if not slowdown > 0 or not time_scale > 0:
            raise ValueError(f"slowdown and time_scale must be > 0: {slowdown}, {time_scale}")
        t0 = self.requests[0].timestamp_ms if self.requests else 0.0
        return [(r.timestamp_ms - t0) / 1000.0 * slowdown / time_scale for r in self.requests]

    @property
    def input_tokens(self) -> int:
        return sum(r.input_length for r in self.requests)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_length for r in self.requests)


def _block(hash_id: int, size: int, vocab_size: int, seed: int) -> np.ndarray:
    ids: np.ndarray = np.random.default_rng([seed, 3, hash_id]).integers(
        0, vocab_size, size=size, dtype=np.int64)
    return ids


def read_trace(path: Path, block_size: int = MOONCAKE_BLOCK) -> Trace:
    """A Mooncake-format JSONL file as a :class:`Trace`, every line checked
    (:func:`pytest_ppsweep.matrix.tracefile.read_requests`)."""
    return Trace(path.stem, read_requests(path, block_size), block_size)


def shared_prefix_trace(num_requests: int, input_len: int, output_len: int, *,
                        prefix_len: int, share: float, block_size: int = 64,
                        interval_ms: float = 0.0, name: str = "shared-prefix") -> Trace:
    """A workload with a stated prefix share: ``round(share × n)`` requests, spread evenly
    through the round, start with one common prefix of ``prefix_len`` tokens (whole blocks);
    every other block of every request is its own. ``prefix_len`` must be a multiple
    of ``block_size`` and below ``input_len``."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1], got {share}")
    if prefix_len % block_size or not 0 <= prefix_len < input_len:
        raise ValueError(f"prefix_len must be a multiple of {block_size} in [0, {input_len}), "
                         f"got {prefix_len}")
    sharing = round(share * num_requests)
    # spread the sharing requests evenly (Bresenham), so a round's share holds in every part
    shares = [(i + 1) * sharing // num_requests > i * sharing // num_requests
              for i in range(num_requests)]
    nblocks = math.ceil(input_len / block_size)
    common = tuple(range(prefix_len // block_size))
    next_id = len(common)
    requests = []
    for i, shared in enumerate(shares):
        own_from = len(common) if shared else 0
        ids = list(common[:own_from])
        for _ in range(nblocks - own_from):
            ids.append(next_id)
            next_id += 1
        requests.append(TraceRequest(i * interval_ms, input_len, output_len, tuple(ids)))
    return Trace(name, tuple(requests), block_size)


@dataclass(frozen=True)
class HitRateCheck:
    """A round's achieved prefix hit rate against the workload's implied one."""

    implied: float
    achieved: float | None  # None: the server reported nothing to compute it from
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.achieved is not None and abs(self.achieved - self.implied) <= self.tolerance

    def text(self) -> str:
        if self.achieved is None:
            return (f"prefix hit rate not verified: the server reported no cached tokens "
                    f"(implied {self.implied:.1%})")
        verdict = "within" if self.ok else "OFF by more than"
        return (f"prefix hit rate {self.achieved:.1%} achieved, {self.implied:.1%} implied: "
                f"{verdict} ±{self.tolerance:.1%}")


def check_hit_rate(implied: float, cached_tokens_delta: float | None,
                   prompt_tokens_delta: float | None, tolerance: float = 0.05) -> HitRateCheck:
    """The achieved hit rate from the server's own counters, as deltas over the round (cached
    prompt tokens over prompt tokens), held against the implied one."""
    if cached_tokens_delta is None or not prompt_tokens_delta:
        return HitRateCheck(implied, None, tolerance)
    return HitRateCheck(implied, cached_tokens_delta / prompt_tokens_delta, tolerance)
