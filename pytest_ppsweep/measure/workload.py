"""The benchmark workload: bench_serving's ``random-ids`` prompts, built once and reused.

Prompt ``i`` is the token-id sequence ``(offset_i + i + j) % vocab_size`` for ``j`` in
``range(length_i)``, exactly as bench_serving's random-ids dataset, and is sent as ``input_ids``
(bench_serving's ``--tokenize-prompt``), so the server counts exactly ``length_i`` prompt tokens.
Lengths are uniform integers in ``[max(int(L * range_ratio), 1), L]``; offsets are uniform in
``[0, vocab_size)``. Both come from a numpy ``Generator`` seeded with ``(seed, 0)``, so the set
is identical across configurations, concurrencies and repeats.

Differences from bench_serving, and why:

* Every prompt (measured and warmup) starts with a distinct first id: a drawn offset that would
  repeat an earlier start is bumped by one until it is free. Prompts that start alike share a
  radix-cache prefix and would be served from cache, inflating input throughput.
* Warmup prompts come from their own generator (``(seed, 1)``), never the first measured prompt:
  bench_serving warms up with prompt 0, which then hits the radix cache when measured.
* The output length is ``output_len`` for every request (the prefill benchmark wants 1 token);
  bench_serving also draws output lengths with the range ratio.
* Request bodies are serialised to bytes once per (api, output_len, model) and reused by every
  round: 16K-int ``json.dumps`` per request per round costs more client CPU than the server time.

A trace or shared-prefix workload (:func:`trace_prompts`) sends other prompts: each request's
blocks of measure/tracereplay.py (equal hash ids, equal token blocks), its own output length, and
the arrivals of the trace's timestamps; the set carries the prefix hit rate its sharing implies,
which a round holds against the server's achieved one.

``PromptSet.digest`` is the sha256 (hex) of: the prompt count as little-endian int64, then per
prompt its length as little-endian int64 followed by its ids as little-endian int64.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np
import orjson

from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.measure.tracereplay import Trace

APIS = ("generate", "completions")


@dataclass(frozen=True)
class WorkloadSpec:
    """What one round sends; timeouts are wall-clock seconds (they bound the test session)."""

    input_len: int
    output_len: int
    range_ratio: float
    num_requests: int
    seed: int
    vocab_size: int
    warmup_requests: int = 1
    api: str = "generate"  # "generate" (/generate) or "completions" (/v1/completions)
    request_rate: float = math.inf  # requests per (scaled) second; inf = all at t=0, gated by C
    burstiness: float = 1.0  # gamma shape of the arrival gaps; 1 = Poisson (measure/arrivals.py)
    arrival_stream: int = 0  # which arrival schedule (measure/arrivals.py): an SLO probe's own
    request_timeout_s: float = 600.0
    round_timeout_s: float = 3600.0

    def __post_init__(self) -> None:
        problems = []
        if self.input_len < 1 or self.output_len < 1 or self.num_requests < 1:
            problems.append("input_len, output_len and num_requests must be >= 1")
        if not 0.0 <= self.range_ratio <= 1.0:
            problems.append(f"range_ratio must be in [0, 1], got {self.range_ratio}")
        if self.vocab_size < 2:
            problems.append(f"vocab_size must be >= 2, got {self.vocab_size}")
        if self.warmup_requests < 0:
            problems.append("warmup_requests must be >= 0")
        if self.num_requests + self.warmup_requests > self.vocab_size:
            problems.append("more prompts than vocab_size: first ids cannot all differ")
        if self.api not in APIS:
            problems.append(f"api must be one of {APIS}, got {self.api!r}")
        if not self.request_rate > 0:
            problems.append(f"request_rate must be > 0 (inf = unbounded), got {self.request_rate}")
        if not self.burstiness > 0:
            problems.append(f"burstiness must be > 0, got {self.burstiness}")
        if not (self.request_timeout_s > 0 and self.round_timeout_s > 0):
            problems.append("request_timeout_s and round_timeout_s must be > 0")
        if problems:
            raise ValueError("invalid WorkloadSpec: " + "; ".join(problems))


@dataclass(frozen=True)
class Prompt:
    """One prompt: random-ids ``(offset + index + j) % vocab_size`` for j < length, or, with a
    ``trace``, that trace's request ``index`` (its blocks under ``offset`` as the seed) asking
    ``output_len`` tokens (0: the workload's)."""

    index: int
    length: int
    offset: int
    vocab_size: int
    output_len: int = 0
    trace: Trace | None = field(default=None, compare=False, repr=False)

    def id_array(self) -> np.ndarray:
        """The token ids as an int64 numpy array."""
        if self.trace is not None:
            return np.asarray(self.trace.prompt_ids(self.index, self.vocab_size, self.offset),
                              dtype=np.int64)
        return (self.offset + self.index + np.arange(self.length, dtype=np.int64)) % self.vocab_size

    def ids(self) -> list[int]:
        """The token ids as a list of Python ints (what is sent as ``input_ids``)."""
        ids: list[int] = self.id_array().tolist()
        return ids


@dataclass(frozen=True)
class PromptSet:
    """Measured prompts, warmup prompts and the digest of the measured ones."""

    spec: WorkloadSpec
    prompts: tuple[Prompt, ...]
    warmup: tuple[Prompt, ...]
    digest: str
    # A trace's own arrivals (scaled seconds from the round's start; None: the spec's rate)
    arrivals: tuple[float, ...] | None = None
    # The prefix hit rate the prompts' sharing implies (None: they share nothing on purpose),
    # and how far a round's achieved rate may be from it
    implied_hit_rate: float | None = None
    hit_tolerance: float = 0.05
    # Serialised bodies per (warmup?, api, output_len, model); excluded from eq/repr.
    _bodies: dict[tuple[bool, str, int, str | None], tuple[bytes, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def bodies(self, spec: WorkloadSpec, model: str | None, *, warmup: bool = False,
               engine: Engine | None = None) -> tuple[bytes, ...]:
        """Request bodies (JSON bytes) for ``spec.api``, built on first use and then cached
        (the native API's in ``engine``'s words, the default engine's when None; a sweep, whose
        prompts these are, has one engine)."""
        key = (warmup, spec.api, spec.output_len, model)
        if key not in self._bodies:
            source = self.warmup if warmup else self.prompts
            self._bodies[key] = tuple(request_body(p, spec, model, engine) for p in source)
        return self._bodies[key]


def request_body(prompt: Prompt, spec: WorkloadSpec, model: str | None,
                 engine: Engine | None = None) -> bytes:
    """The JSON body bench_serving would send for this prompt (streaming, ignore_eos, greedy):
    the engine's native API's (``generate``), or the OpenAI-compatible completions'."""
    ids = prompt.ids()
    output_len = prompt.output_len or spec.output_len
    payload: dict[str, object]
    if spec.api == "generate":
        payload = (engine or engine_of()).stream_request(ids, max_new_tokens=output_len)
    else:
        if not model:
            raise ValueError("the completions API needs a model name")
        payload = {
            "model": model,
            "prompt": ids,
            "max_tokens": output_len,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    # orjson: the same bytes as json.dumps(separators=(",", ":")), 25x faster on 16K-id bodies.
    return orjson.dumps(payload)


def _draw(spec: WorkloadSpec, stream: int, count: int, taken: set[int]) -> tuple[Prompt, ...]:
    """``count`` prompts from generator ``(seed, stream)``, with first ids not in ``taken``."""
    rng = np.random.default_rng([spec.seed, stream])
    low = max(int(spec.input_len * spec.range_ratio), 1)
    lengths = rng.integers(low, spec.input_len + 1, size=count)
    offsets = rng.integers(0, spec.vocab_size, size=count)
    prompts = []
    for i in range(count):
        offset = int(offsets[i])
        # Bump until the first id is new: equal first ids mean a shared radix-cache prefix.
        while (offset + i) % spec.vocab_size in taken:
            offset = (offset + 1) % spec.vocab_size
        taken.add((offset + i) % spec.vocab_size)
        prompts.append(Prompt(i, int(lengths[i]), offset, spec.vocab_size))
    return tuple(prompts)


def prompt_digest(prompts: tuple[Prompt, ...]) -> str:
    """sha256 hex of the prompt count, then each prompt's length and ids (int64 LE)."""
    h = hashlib.sha256(np.int64(len(prompts)).astype("<i8").tobytes())
    for p in prompts:
        h.update(np.int64(p.length).astype("<i8").tobytes())
        h.update(p.id_array().astype("<i8").tobytes())
    return h.hexdigest()


def generate_prompts(spec: WorkloadSpec) -> PromptSet:
    """Build the seeded prompt set (measured + warmup) for ``spec``."""
    taken: set[int] = set()
    prompts = _draw(spec, 0, spec.num_requests, taken)
    warmup = _draw(spec, 1, spec.warmup_requests, taken)
    return PromptSet(spec, prompts, warmup, prompt_digest(prompts))


def trace_prompts(spec: WorkloadSpec, trace: Trace, *, slowdown: float = 1.0,
                  replay: bool = True, hit_tolerance: float = 0.05) -> PromptSet:
    """The prompt set of a trace (a Mooncake file's first ``spec.num_requests`` requests, or a
    shared-prefix workload's): request ``i``'s blocks seeded by ``spec.seed``, its own output
    length; the arrivals of its timestamps times ``slowdown`` when ``replay`` (else the spec's
    rate); the warm-up prompts random-ids whose first ids no measured prompt starts with."""
    used = Trace(trace.name, trace.requests[: spec.num_requests], trace.block_size)
    prompts = tuple(Prompt(i, r.input_length, spec.seed, spec.vocab_size, r.output_length, used)
                    for i, r in enumerate(used.requests))
    taken = {int(p.id_array()[0]) for p in prompts}
    warmup = _draw(spec, 1, spec.warmup_requests, taken)
    arrivals = tuple(used.schedule(slowdown=slowdown)) if replay else None
    return PromptSet(spec, prompts, warmup, prompt_digest(prompts), arrivals=arrivals,
                     implied_hit_rate=used.implied_hit_rate(), hit_tolerance=hit_tolerance)


make_prompts = generate_prompts  # the name the sweep runner uses
