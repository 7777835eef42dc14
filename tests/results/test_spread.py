"""The spread rule once (results/spread.py): every round when there are only the planned ones,
the planned count nearest the median once extra rounds exist; when to run one more round."""

from __future__ import annotations

import math

import pytest

from pytest_ppsweep.results.spread import more_rounds, spread_pct


def test_planned_rounds_use_the_plain_range() -> None:
    assert spread_pct([98.0, 100.0, 102.0], keep=3) == pytest.approx(4.0)
    assert spread_pct([98.0, 100.0, 102.0]) == pytest.approx(4.0)
    assert math.isnan(spread_pct([])) and math.isnan(spread_pct([0.0, 0.0]))


def test_extra_rounds_take_an_outlier_out_not_the_threshold() -> None:
    rounds = [100.0, 100.5, 92.0, 100.2, 99.9]  # one round slowed by a neighbour
    assert spread_pct(rounds) > 8.0
    # median 100.0: the three nearest are 99.9, 100.0 and 100.2
    assert spread_pct(rounds, keep=3) == pytest.approx((100.2 - 99.9) / 100.0 * 100)


def test_more_rounds_until_the_rule_holds_or_the_cap() -> None:
    assert more_rounds([100.0, 92.0], planned=3, threshold_pct=2.0, max_repeats=8) is None
    why = more_rounds([100.0, 92.0, 100.4], planned=3, threshold_pct=2.0, max_repeats=8)
    assert why is not None and "after 3 round(s)" in why
    assert more_rounds([100.0, 92.0, 100.4, 100.2], planned=3, threshold_pct=2.0,
                       max_repeats=8) is None  # the three nearest the median agree
    noisy = [100.0, 90.0, 110.0, 95.0, 105.0, 92.0, 108.0, 100.0]
    assert more_rounds(noisy, planned=3, threshold_pct=2.0, max_repeats=8) is None  # cap
    assert more_rounds([1.0, 1.0, 1.0], planned=3, threshold_pct=2.0, max_repeats=8) is None
