"""The M/D/1 queue model of an SLO probe (stats/md1queue.py): Erlang's waiting-time distribution
checked against a simulation of the same queue, and the fewest requests whose empty start keeps
its bias within a share."""

from __future__ import annotations

import random

import pytest

from pytest_ppsweep.stats.md1queue import (
    capacity_utilisation,
    md1_wait_cdf,
    requests_for,
    start_bias,
)

S = 16384 / 8800  # the seeds' 16K prompt on PP8: 1.86 s of prefill


def _simulated_waits(rho: float, n: int = 200_000) -> list[float]:
    rng, t, free, out = random.Random(7), 0.0, 0.0, []
    for _ in range(n):
        start = max(t, free)
        out.append(start - t)
        free = start + S
        t += rng.expovariate(rho / S)
    return out[20_000:]


@pytest.mark.parametrize("rho", [0.5, 0.8, 0.9])
def test_erlangs_distribution_is_the_simulated_queues(rho: float) -> None:
    waits = _simulated_waits(rho)
    for x in (0.5 * S, 1.7 * S, 4.3 * S):
        simulated = sum(w <= x for w in waits) / len(waits)
        assert md1_wait_cdf(x, rho, S) == pytest.approx(simulated, abs=0.015), (rho, x)
    assert md1_wait_cdf(0.0, rho, S) == pytest.approx(1 - rho)  # no wait: an empty queue
    assert md1_wait_cdf(-1.0, rho, S) == 0.0 and md1_wait_cdf(3 * S, 0.0, S) == 1.0


def test_far_limits_keep_their_digits() -> None:
    """40 service times of wait: the alternating terms reach e^36 and still sum to a share."""
    assert 0.9 < md1_wait_cdf(40 * S, 0.9, S) <= 1.0
    assert md1_wait_cdf(40 * S, 0.9, S) > md1_wait_cdf(20 * S, 0.9, S)


def test_the_size_is_the_fewest_requests_whose_start_bias_is_within_the_share() -> None:
    """The seeds' SLO (TTFT p50 ≤ 5 s at S = 1.86 s: ρ* ≈ 0.84) with ¾ of a 10 % precision: 198
    requests; a floor above that wins, and a looser share asks fewer."""
    rho = capacity_utilisation(S, 5.0, 50)
    assert rho is not None
    n = requests_for(rho, 0.075, 0.1, 1)
    assert n == 198
    assert start_bias(n, rho, 0.1) <= 0.075 < start_bias(n - 1, rho, 0.1)
    assert requests_for(rho, 0.075, 0.1, 300) == 300
    assert requests_for(rho, 0.15, 0.1, 1) < n

