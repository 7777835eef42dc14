"""The spread rule once (stats/spread.py): every round when there are only the planned ones,
the planned count nearest the median once extra rounds exist; when to run one more round."""

from __future__ import annotations

import math

import pytest

from pytest_ppsweep.stats.spread import boot_spread_pct, more_rounds, spread_pct


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


def test_a_point_of_several_boots_is_judged_within_each_boot() -> None:
    """Two boots 3 % apart, each steady: the spread rule looks within a boot (0.2 %), not across
    the boots (3.15 %: the decision's second level); single-round boots have no spread within a
    boot (NaN, not the boots' difference); one boot is the plain rule."""
    values = [1000.0, 1001.0, 1002.0, 1030.0, 1031.0, 1032.0]
    boots = ["a", "a", "a", "b", "b", "b"]
    assert spread_pct(values) == pytest.approx(3.15, abs=0.01)
    assert boot_spread_pct(values, boots) == pytest.approx(0.2, abs=0.01)
    assert boot_spread_pct([1000.0, 1001.0, 1040.0, 1000.0], ["a", "a", "b", "b"]) == \
        pytest.approx(3.92, abs=0.01)  # the worse boot decides
    assert math.isnan(boot_spread_pct([1000.0, 1030.0, 1015.0], ["a", "b", "c"]))
    assert boot_spread_pct(values, [""] * 6) == spread_pct(values)
    assert boot_spread_pct(values, ["a"] * 6, keep=3) == spread_pct(values, 3)
