"""Bounds of a share (stats/binomial.py): Clopper-Pearson against the beta quantiles, the fewest
trials that prove a percentile, batch-means dispersion, Wilson's interval."""

from __future__ import annotations

import pytest

from pytest_ppsweep.stats.binomial import binomial_bounds, dispersion, min_requests, wilson


@pytest.mark.parametrize(("k", "n", "lower", "upper"), [
    # scipy.stats.beta.ppf(0.05, k, n - k + 1) and beta.ppf(0.95, k + 1, n - k)
    (12, 40, 0.18312, 0.44028), (0, 40, 0.0, 0.07216), (40, 40, 0.92784, 1.0),
    (1, 10, 0.00512, 0.39416), (20, 40, 0.36109, 0.63891),
])
def test_clopper_pearson_bounds_match_the_beta_quantiles(k: int, n: int, lower: float,
                                                          upper: float) -> None:
    low, high = binomial_bounds(k, n, 0.95)
    assert low == pytest.approx(lower, abs=2e-5) and high == pytest.approx(upper, abs=2e-5)


def test_the_fewest_requests_that_can_prove_a_percentile() -> None:
    # (1 - q)^n <= 1 - c: MLPerf's early-stopping count with no request over the limit
    assert [min_requests(q, 0.95) for q in (50, 90, 95, 99)] == [5, 29, 59, 299]
    assert min_requests(99, 0.99) == 459


def test_dispersion_by_batch_means() -> None:
    """10 of 40 over, all in one run at the end: 6 batches of 6, five with none over and one all
    over, vary 7.2 × a binomial's; the same 10 spread through keep φ = 1; too few batches or no
    success at all: 1."""
    assert dispersion([v > 2.0 for v in [1.0] * 30 + [3.0] * 10]) == pytest.approx(7.2)
    assert dispersion([v > 2.0 for v in [1.0, 1.0, 1.0, 3.0] * 10]) == 1.0
    assert dispersion([False, True] * 10) == 1.0 and dispersion([False] * 100) == 1.0
    assert dispersion([True] * 4 + [False] * 12) == 1.0  # 4 batches of 4


def test_wilson_interval() -> None:
    low, high = wilson(8, 10)  # the textbook value: [0.4902, 0.9433]
    assert (low, high) == (pytest.approx(0.4902, abs=1e-3), pytest.approx(0.9433, abs=1e-3))
    low, high = wilson(0, 20)
    assert low == pytest.approx(0.0, abs=1e-12) and high > 0.1  # not empty at 0/n
    assert wilson(20, 20)[1] == 1.0 and wilson(20, 20)[0] < 0.9
    with pytest.raises(ValueError, match="0 ≤ correct ≤ n"):
        wilson(3, 2)
