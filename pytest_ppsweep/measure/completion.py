"""The N/N rule, written once: when one round counts.

A round counts when it sent at least one request, every request completed (``completed ==
num_requests``), none failed, and the server counted the prompt tokens that were sent
(``input_tokens == input_tokens_nominal``: ids sent as ``input_ids`` are counted as sent; a gap
means the server re-tokenised or truncated, so the numbers are not of the intended workload), and
produced the completion tokens that were asked (``output_tokens == output_tokens_nominal``: the
workload fixes the output length and sends ``ignore_eos``; more or fewer tokens means another
workload ran, e.g. a 1-token prefill benchmark that decoded 3 tokens). A round recorded before the
completion check (no ``output_tokens_nominal``) is judged on the other parts only.

A round of a workload that shares prefixes on purpose (a trace, a shared-prefix workload) also
counts only when the server's achieved prefix hit rate is within the tolerance of the rate the
sharing implies (measure/tracereplay.check_hit_rate): else it measured another workload, a cold
or evicted cache. A rate not measured (an emulator has no prefix cache) is said so, and does not
exclude the round.

:func:`request_problem` is the same rule for one request (the load generator fails a request
whose ``completion_tokens`` differs from the asked length, naming both).

:func:`round_problems` is the rule; everything else here only reads one round's fields from
where they are kept (a :class:`RoundResult`, a results.csv row as a dict of strings or of pandas
values) and calls it. The test's check, the verdict, the gate, benchmark.json and reuse all go
through it, so they cannot disagree on which rounds count. Pandas-free on purpose (the frame
adapter lives with the frame, in ``results.aggregate``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.measure.tracereplay import check_hit_rate

# What a reason is about: callers that phrase the N/N part in their own words test ``kind``.
NO_REQUESTS = "no requests"
INCOMPLETE = "incomplete"
FAILED = "failed"
TOKENS = "prompt tokens"
OUTPUT = "completion tokens"
HIT_RATE = "prefix hit rate"
WRONG_OUTPUT = "wrong output length"  # a request's error_kind (measure.bench)
NN_KINDS = frozenset({NO_REQUESTS, INCOMPLETE, FAILED})


@dataclass(frozen=True)
class Shortfall:
    """One reason a round does not count: its kind (see the constants above) and its text."""

    kind: str
    text: str

    def __str__(self) -> str:
        return self.text


def count(value: Any) -> int | None:
    """A count as recorded anywhere (int, float, ``"48"``, ``"48.0"``, ``""``, NaN, ``pd.NA``,
    None); None when missing or not a whole number."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        number = float(value if isinstance(value, float) else str(value).strip())
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number) or number != int(number):
        return None
    return int(number)


def _shown(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def request_problem(asked: int, got: int | None) -> str | None:
    """Why one completed request does not count: the server produced another number of
    completion tokens than asked (None when it did, or reported no count: the round's
    :func:`round_problems` then finds the missing total)."""
    if got is None or got == asked:
        return None
    return f"asked {asked:,} completion token(s), got {got:,}"


def round_problems(
    num_requests: int | None,
    completed: int | None,
    failed: int | None,
    input_tokens: int | None,
    input_tokens_nominal: int | None,
    output_tokens: int | None = None,
    output_tokens_nominal: int | None = None,
    hit_rate: tuple[float, float, float] | None = None,
) -> list[Shortfall]:
    """Why one round does not count (empty when it does). None is a missing value: a missing
    count of completed requests or of tokens breaks the round; a missing ``failed`` does not on
    its own (``failed = num_requests - completed``, which the completed check already covers);
    a missing ``output_tokens_nominal`` (a round recorded before the completion check) skips
    the completion-token part. ``hit_rate``: (implied, achieved, tolerance) of a round whose
    prompts share prefixes on purpose and whose server measured its hit rate."""
    problems = []
    if num_requests is not None and num_requests < 1:
        problems.append(Shortfall(NO_REQUESTS, f"no requests sent ({num_requests})"))
    if num_requests is None or completed is None or completed != num_requests:
        problems.append(Shortfall(INCOMPLETE,
                                  f"{_shown(completed)}/{_shown(num_requests)} completed"))
    if failed is not None and failed != 0:
        problems.append(Shortfall(FAILED, f"{_shown(failed)} failed request(s)"))
    if input_tokens is None or input_tokens_nominal is None or (
            input_tokens != input_tokens_nominal):
        problems.append(Shortfall(TOKENS, f"server counted {_shown(input_tokens)} prompt tokens, "
                                          f"sent {_shown(input_tokens_nominal)}"))
    if output_tokens_nominal is not None and output_tokens != output_tokens_nominal:
        problems.append(Shortfall(OUTPUT, f"server counted {_shown(output_tokens)} completion "
                                          f"tokens, asked {_shown(output_tokens_nominal)}"))
    if hit_rate is not None:
        check = check_hit_rate(hit_rate[0], hit_rate[1], 1.0, hit_rate[2])
        if not check.ok:
            problems.append(Shortfall(HIT_RATE, check.text()))
    return problems


def _hit(implied: Any, achieved: Any, tolerance: Any) -> tuple[float, float, float] | None:
    """The (implied, achieved, tolerance) of a round, as recorded anywhere; None when any is
    missing (no sharing on purpose, or not measured)."""
    values = []
    for value in (implied, achieved, tolerance):
        try:
            number = float(value if isinstance(value, float | int) else str(value).strip())
        except (TypeError, ValueError):
            return None
        if value is None or isinstance(value, bool) or not math.isfinite(number):
            return None
        values.append(number)
    return values[0], values[1], values[2]


def result_problems(result: RoundResult) -> list[Shortfall]:
    """:func:`round_problems` of a measured round."""
    return round_problems(result.num_requests, result.completed, result.failed,
                          result.input_tokens, result.input_tokens_nominal,
                          result.output_tokens, result.output_tokens_nominal,
                          _hit(result.hit_rate_implied, result.hit_rate_achieved,
                               result.hit_rate_tolerance))


def row_problems(row: Mapping[str, Any]) -> list[Shortfall]:
    """:func:`round_problems` of a results.csv row (strings from ``csv``, or a frame record);
    a missing column is a missing value."""
    n, done, failed, inp, inp_nominal, out, out_nominal = (count(row.get(k)) for k in (
        "num_requests", "completed", "failed", "input_tokens", "input_tokens_nominal",
        "output_tokens", "output_tokens_nominal"))
    return round_problems(n, done, failed, inp, inp_nominal, out, out_nominal,
                          hit_rate=_hit(row.get("hit_rate_implied"),
                                        row.get("hit_rate_achieved"),
                                        row.get("hit_rate_tolerance")))


def counts(row: Mapping[str, Any]) -> bool:
    """Whether the round of ``row`` counts (no :func:`row_problems`)."""
    return not row_problems(row)
