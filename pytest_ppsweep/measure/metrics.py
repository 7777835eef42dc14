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
* ``output_tokens`` [total_output]: sum of server ``completion_tokens`` of completed requests.
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
    "input_tps", "input_tps_nominal", "output_tokens", "ttft_mean_s", "ttft_p50_s", "ttft_p95_s",
    "ttft_p99_s", "e2e_mean_s", "e2e_p50_s", "e2e_p99_s", "peak_concurrency", "prompt_digest",
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
    concurrency: int = 0  # the limit C the round ran with (0 when unknown)
    time_scale: float = 1.0
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
            row[key] = value
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


def summarize(
    records: Iterable[Record],
    *,
    num_requests: int | None = None,
    peak_concurrency: int,
    prompt_digest: str,
    concurrency: int = 0,
    time_scale: float = 1.0,
    warmup_records: Iterable[Record] = (),
) -> RoundResult:
    """Compute a RoundResult from per-request records (scaled times already in the records)."""
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
        output_tokens=_server_sum(done, "completion_tokens"),
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
        concurrency=concurrency,
        time_scale=time_scale,
        records=tuple(recs),
        warmup_records=tuple(dict(r) for r in warmup_records),
    )
