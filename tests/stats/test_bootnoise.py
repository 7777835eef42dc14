"""The boot-to-boot variance pooled over earlier runs (stats/bootnoise.py): each run one boot of
an unchanged configuration, the within-run share subtracted, configurations pooled by their
degrees of freedom."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from pytest_ppsweep.stats.bootnoise import RunMean, between_runs


def _run(rng: random.Random, offset: float, sigma_w: float, n: int) -> RunMean:
    logs = [offset + rng.gauss(0.0, sigma_w) for _ in range(n)]
    return RunMean(statistics.fmean(logs), statistics.variance(logs), n)


def test_the_estimate_by_hand() -> None:
    runs = [RunMean(0.00, 1e-4, 3), RunMean(0.02, 1e-4, 3), RunMean(-0.01, 4e-4, 4)]
    found = between_runs({"pp8": {8: runs}})
    assert found is not None
    want = statistics.variance([0.0, 0.02, -0.01]) - statistics.fmean([1e-4 / 3, 1e-4 / 3,
                                                                       4e-4 / 4])
    assert found.var == pytest.approx(want) and found.df == 2 and found.configurations == 1


def test_cs_of_one_configuration_are_one_estimate_with_the_fewest_runs() -> None:
    a = [RunMean(0.0, 1e-4, 3), RunMean(0.03, 1e-4, 3), RunMean(0.01, 1e-4, 3)]
    b = [RunMean(0.0, 1e-4, 3), RunMean(0.01, 1e-4, 3)]
    found = between_runs({"pp8": {8: a, 16: b}})
    assert found is not None and found.df == 1  # two runs at C=16: one degree of freedom
    one = between_runs({"x": {8: a}})
    two = between_runs({"x": {16: b}})
    assert one is not None and two is not None
    assert found.var == pytest.approx((one.var + two.var) / 2)


def test_nothing_to_pool_and_the_floor_at_zero() -> None:
    assert between_runs({}) is None
    assert between_runs({"pp8": {8: [RunMean(0.0, 1e-4, 3)]}}) is None  # one run
    assert between_runs({"pp8": {8: [RunMean(0.0, math.nan, 1), RunMean(0.1, 1e-4, 3)]}}) is None
    # run means closer than their rounds' noise allows: the estimate is floored at 0
    found = between_runs({"pp8": {8: [RunMean(0.0, 1e-2, 3), RunMean(0.001, 1e-2, 3)]}})
    assert found is not None and found.var == 0.0


@pytest.mark.parametrize(("sigma_b", "sigma_w"), [(0.01, 0.005), (0.02, 0.01), (0.0, 0.01)])
def test_unbiased_on_simulated_boots(sigma_b: float, sigma_w: float) -> None:
    """Many simulated histories (4 configurations × 3 runs × 3 rounds): the estimate's mean is
    the true between-boot variance (before the floor: the floor biases only the σ_b = 0 case
    upward, and by less than the within share of one run's mean)."""
    rng = random.Random(7)
    got = []
    for _ in range(2000):
        points = {f"c{c}": {8: [_run(rng, rng.gauss(0.0, sigma_b), sigma_w, 3)
                                for _ in range(3)]} for c in range(4)}
        found = between_runs(points)
        assert found is not None and found.df == 8
        got.append(found.var)
    mean = statistics.fmean(got)
    if sigma_b:
        assert mean == pytest.approx(sigma_b ** 2, rel=0.1)
    else:
        assert mean < sigma_w ** 2 / 3
