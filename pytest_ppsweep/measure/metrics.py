"""Round metrics: pure functions over per-request records (see bench.py for the record keys).

A request is *completed* when it got HTTP 200, a stream whose events carried no error object,
a final chunk (``finish_reason`` set, not an abort) and ``data: [DONE]``. Everything else is
*failed* with a reason. Times are seconds, already multiplied by the round's ``time_scale``
(emulated time on the emulator; ``*_raw_s`` in the records keep the measured wall-clock values).

Metric definitions (bench_serving's ``calculate_metrics`` names in brackets where equal):

* ``num_requests``: requests in the round (warmup excluded).
* ``completed`` [completed], ``failed = num_requests - completed``. Differs: bench_serving
  counts a 200 stream carrying ``{"error": ...}`` as a success; here it is a failure.
* ``duration_s`` [benchmark_duration]: first send to last end (completed or failed) over the
  requests actually sent. Differs: bench_serving starts before the first send and stops after one
  extra ``/server_info`` round trip; neither is part of the service's work.
* ``input_tokens``: sum of the server-counted ``prompt_tokens`` of completed requests (None if a
  completed request carried no count). ``input_tokens_nominal`` [total_input]: sum of the sent
  lengths of completed requests. They are equal when ids are sent as ``input_ids``; a gap means
  the server did not see what we sent.
* ``input_tps`` / ``input_tps_nominal`` [input_throughput]: the two above over ``duration_s``.
* ``output_tokens`` [total_output]: sum of server ``completion_tokens`` of completed requests
  (what the server produced, not what was asked). ``output_tokens_nominal``: the asked output
  length times the completed requests (None when the caller gave no length); the N/N rule
  (completion.py) compares the two.
* ``ttft_*_s`` [mean/median/p95/p99_ttft_ms, in s]: over completed requests only, TTFT measured
  at the first ``data:`` event whatever its text. Differs: bench_serving waits for non-empty text
  and records 0.0 when there never is any (a 1-token answer can be a skipped special token), and
  includes failed requests' 0.0 values; both drag its statistics down.
* ``e2e_*_s`` [mean/median/p99_e2e_latency_ms, in s]: send to ``data: [DONE]``, completed only.
* Percentiles are ``np.percentile`` with linear interpolation, as bench_serving. With nothing
  completed every statistic is NaN (``None`` in ``as_row``).
* ``peak_concurrency``: the most requests this client had in flight at once, counted around each
  request. Differs: bench_serving's "Peak concurrent requests" can exceed ``--max-concurrency``.
* ``errors``: Counter of the records' ``error_kind`` (e.g. ``"timeout"``, ``"http 503"``).

Decode metrics (bench_serving's ``calculate_metrics`` and its ``sglang`` request function; the
records' ``chunk_s``/``chunk_tokens`` are the arrival of every event that carried output and the
completion tokens the server had counted by then, see bench.py):

* ``tpot_mean_s``, ``tpot_p50_s``, ``tpot_p99_s`` [mean/median/p99_tpot_ms, in s]: per completed
  request with ``completion_tokens > 1``, ``(e2e_s - ttft_s) / (completion_tokens - 1)``;
  requests of one token, and failed requests, do not count (as bench_serving). Differs: the
  ``ttft_s`` used is ours (first ``data:`` event, see above), and with nothing counted every
  statistic is NaN where bench_serving reports 0.0.
* ``itl_mean_s``, ``itl_p50_s``, ``itl_p99_s`` [mean/median/p99_itl_ms, in s]: pooled over the
  completed requests. Between two consecutive output events of a request the gap is spread
  evenly over the tokens the second one added (``gap / n``, ``n`` times), so a chunk of several
  tokens gives several equal ITLs; an event that added no token is skipped and the next gap is
  measured from the last event that did (both as bench_serving's ``sglang`` backend). When the
  server gave no cumulative count (the completions API streams ``usage`` only at the end) each
  output event counts as one token (as bench_serving's ``sglang-oai`` backend). The first output
  event's tokens are TTFT's, not ITL's. Differs: bench_serving requires non-empty ``text`` of
  an event; here an event with output is one whose count grew (``/generate``) or whose choice
  carried text (completions).
* ``output_tps`` [output_throughput]: ``output_tokens`` over ``duration_s`` (NaN when a
  completed request carried no count). Differs only by ``duration_s`` (see above).
* ``e2e_*_s`` above is bench_serving's E2E latency.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Record = Mapping[str, Any]
RowValue = int | float | str | bool | None

ROW_KEYS = (
    "num_requests", "completed", "failed", "duration_s", "input_tokens", "input_tokens_nominal",
    "input_tps", "input_tps_nominal", "output_tokens", "output_tokens_nominal", "ttft_mean_s",
    "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "e2e_mean_s", "e2e_p50_s", "e2e_p99_s",
    "peak_concurrency", "prompt_digest", "tpot_mean_s", "tpot_p50_s", "tpot_p99_s",
    "itl_mean_s", "itl_p50_s", "itl_p99_s", "output_tps",
    "hit_rate_implied", "hit_rate_achieved", "hit_rate_source", "hit_rate_tolerance",
)  # fmt: skip


@dataclass(frozen=True)
class RoundResult:
    """Metrics of one round (definitions in the module docstring) plus its records."""

    num_requests: int
    completed: int
    failed: int
    duration_s: float
    duration_raw_s: float
    input_tokens: int | None
    input_tokens_nominal: int
    input_tps: float
    input_tps_nominal: float
    output_tokens: int | None
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_p99_s: float
    e2e_mean_s: float
    e2e_p50_s: float
    e2e_p99_s: float
    peak_concurrency: int
    prompt_digest: str
    errors: Counter[str]
    tpot_mean_s: float = math.nan
    tpot_p50_s: float = math.nan
    tpot_p99_s: float = math.nan
    itl_mean_s: float = math.nan
    itl_p50_s: float = math.nan
    itl_p99_s: float = math.nan
    output_tps: float = math.nan
    output_tokens_nominal: int | None = None  # asked length x completed (None: not given)
    concurrency: int = 0  # the limit C the round ran with (0 when unknown)
    time_scale: float = 1.0
    # A workload that shares prefixes on purpose (bench.py): the hit rate its sharing implies,
    # the server's achieved one over the round (None: not measured), where that came from
    # ("server counters", "per-request cached_tokens", "not measured: <why>") and the
    # tolerance between the two; all None/"" for random-ids prompts.
    hit_rate_implied: float | None = None
    hit_rate_achieved: float | None = None
    hit_rate_source: str = ""
    hit_rate_tolerance: float | None = None
    records: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    warmup_records: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    def as_row(self) -> dict[str, RowValue]:
        """The results.csv metric columns, builtins only, NaN as None."""
        row: dict[str, RowValue] = {}
        for key in ROW_KEYS:
            value = getattr(self, key)
            if isinstance(value, float | np.floating):
                value = None if math.isnan(value) else float(value)
            elif isinstance(value, np.integer):
                value = int(value)
            row[key] = None if value == "" else value
        return row


def _stats(values: list[float], percentiles: Iterable[float]) -> list[float]:
    """Mean then the percentiles (linear interpolation); NaN for an empty list."""
    qs = list(percentiles)
    if not values:
        return [math.nan] * (len(qs) + 1)
    arr = np.asarray(values, dtype=float)
    return [float(arr.mean()), *(float(np.percentile(arr, q)) for q in qs)]


def _server_sum(records: Sequence[Record], key: str) -> int | None:
    """Sum of a server-reported count, None if any record lacks it (cannot be known)."""
    values = [r.get(key) for r in records]
    if any(v is None for v in values):
        return None
    return int(sum(values))  # type: ignore[arg-type]  # None ruled out above


def _per_second(tokens: int | None, duration: float) -> float:
    if tokens is None or duration <= 0:
        return math.nan
    return tokens / duration


def request_tpot(rec: Record) -> float | None:
    """``(e2e - ttft) / (completion_tokens - 1)`` of one record; None when it does not count."""
    tokens = rec.get("completion_tokens")
    if not rec.get("ok") or tokens is None or tokens <= 1:
        return None
    if rec.get("e2e_s") is None or rec.get("ttft_s") is None:
        return None
    return float(rec["e2e_s"] - rec["ttft_s"]) / (int(tokens) - 1)


def request_itls(rec: Record) -> list[float]:
    """Inter-token latencies of one completed record (definition in the module docstring)."""
    times = rec.get("chunk_s") or []
    counts = rec.get("chunk_tokens") or [None] * len(times)
    if not rec.get("ok") or len(times) < 2:
        return []
    itls: list[float] = []
    last_t, last_n = times[0], counts[0]
    for t, n in zip(times[1:], counts[1:], strict=True):
        if n is not None and last_n is not None:
            new = int(n) - int(last_n)
            if new <= 0:
                continue  # no token added: the next gap runs from the last event that added one
        else:
            new = 1
        itls.extend([(t - last_t) / new] * new)
        last_t, last_n = t, n
    return itls


def decode_metrics(done: Sequence[Record], output_tokens: int | None,
                   duration: float) -> dict[str, Any]:
    """The decode fields of RoundResult over the completed records."""
    tpots = [v for v in (request_tpot(r) for r in done) if v is not None]
    itls = [v for r in done for v in request_itls(r)]
    tpot = _stats(tpots, (50, 99))
    itl = _stats(itls, (50, 99))
    return {
        "tpot_mean_s": tpot[0], "tpot_p50_s": tpot[1], "tpot_p99_s": tpot[2],
        "itl_mean_s": itl[0], "itl_p50_s": itl[1], "itl_p99_s": itl[2],
        "output_tps": _per_second(output_tokens, duration),
    }  # fmt: skip


def summarize(
    records: Iterable[Record],
    *,
    num_requests: int | None = None,
    peak_concurrency: int,
    prompt_digest: str,
    concurrency: int = 0,
    time_scale: float = 1.0,
    warmup_records: Iterable[Record] = (),
    output_len: int | Sequence[int] | None = None,
) -> RoundResult:
    """Compute a RoundResult from per-request records (scaled times already in the records);
    ``output_len``: the completion tokens asked of every request, or of each (by index)."""
    recs = [dict(r) for r in records]
    total = len(recs) if num_requests is None else num_requests
    done = [r for r in recs if r.get("ok")]
    sent = [r for r in recs if r.get("sent_at_s") is not None and r.get("done_at_s") is not None]
    if sent:
        duration = max(r["done_at_s"] for r in sent) - min(r["sent_at_s"] for r in sent)
        raw = max(r["done_at_raw_s"] for r in sent) - min(r["sent_at_raw_s"] for r in sent)
    else:
        duration = raw = 0.0
    input_tokens = _server_sum(done, "prompt_tokens")
    nominal = int(sum(r["prompt_len"] for r in done))
    ttft = _stats([r["ttft_s"] for r in done], (50, 95, 99))
    e2e = _stats([r["e2e_s"] for r in done], (50, 99))
    output_tokens = _server_sum(done, "completion_tokens")
    return RoundResult(
        num_requests=total,
        completed=len(done),
        failed=total - len(done),
        duration_s=float(duration),
        duration_raw_s=float(raw),
        input_tokens=input_tokens,
        input_tokens_nominal=nominal,
        input_tps=_per_second(input_tokens, duration),
        input_tps_nominal=_per_second(nominal, duration),
        output_tokens=output_tokens,
        ttft_mean_s=ttft[0],
        ttft_p50_s=ttft[1],
        ttft_p95_s=ttft[2],
        ttft_p99_s=ttft[3],
        e2e_mean_s=e2e[0],
        e2e_p50_s=e2e[1],
        e2e_p99_s=e2e[2],
        peak_concurrency=peak_concurrency,
        prompt_digest=prompt_digest,
        errors=Counter(str(r.get("error_kind")) for r in recs if not r.get("ok")),
        **decode_metrics(done, output_tokens, duration),
        output_tokens_nominal=None if output_len is None else output_len * len(done)
        if isinstance(output_len, int) else sum(output_len[int(r["index"])] for r in done),
        concurrency=concurrency,
        time_scale=time_scale,
        records=tuple(recs),
        warmup_records=tuple(dict(r) for r in warmup_records),
    )
