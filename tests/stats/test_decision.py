"""The decision test (stats/decision.py): the Welch interval on log values, TOST and Holm."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from pytest_ppsweep.stats.decision import (
    Rule,
    Sample,
    half_width_pct,
    holm,
    interval,
    levels,
    stein,
)


def test_welch_on_logs_matches_scipy() -> None:
    a, b = [1000.0, 1010.0, 990.0, 1005.0], [1020.0, 1035.0, 1011.0, 1030.0]
    found = interval(b, a)
    assert found is not None
    # scipy.stats.ttest_ind(log(b), log(a), equal_var=False)
    assert math.isclose(found.p_value, 0.01674867878755944, rel_tol=1e-8)
    assert math.isclose(found.df, 5.7741850138147575, rel_tol=1e-8)
    assert found.low_pct < found.delta_pct < found.high_pct
    assert found.low_pct > 0  # the 95 % interval excludes no difference, as p < 0.05 says


def test_the_interval_narrows_as_repeats_grow() -> None:
    """The spread threshold did not shrink with repeats; this interval does."""
    rng = random.Random(7)
    widths = []
    for n in (3, 8, 32):  # the mean half-width over 200 draws of σ = 1 % per repeat
        total = 0.0
        for _ in range(200):
            found = interval([1000 * math.exp(rng.gauss(0, 0.01)) for _ in range(n)],
                             [1000 * math.exp(rng.gauss(0, 0.01)) for _ in range(n)])
            assert found is not None
            total += found.half_width_pct
        widths.append(total / 200)
    assert widths[0] > 2 * widths[1] > 4 * widths[2]
    assert widths[2] < 0.6  # ≈ 2.0 × σ √(2/32) = 0.5 % at 32 repeats


def test_equivalence_needs_the_interval_inside_the_margin() -> None:
    tight = [1000.0, 1000.5, 999.5, 1000.2]
    near = [v * 1.002 for v in tight]
    found = interval(near, tight)
    assert found is not None and found.p_equiv < 0.05 and found.p_value < 0.05
    loose = interval([1002.0, 992.0, 1012.0], [1000.0, 990.0, 1010.0])
    assert loose is not None and loose.p_equiv > 0.05 and loose.p_value > 0.05
    # a wider margin makes the loose one equivalent
    wide = interval([1002.0, 992.0, 1012.0], [1000.0, 990.0, 1010.0], Rule(min_effect_pct=10))
    assert wide is not None and wide.p_equiv < 0.05


def test_fewer_than_two_values_or_no_variance() -> None:
    assert interval([1.0], [1.0, 2.0]) is None and interval([1.0, 2.0], [3.0]) is None
    exact = interval([2.0, 2.0], [1.0, 1.0])
    assert exact is not None and exact.p_value == 0.0 and exact.p_equiv == 1.0
    same = interval([2.0, 2.0], [2.0, 2.0])
    assert same is not None and same.p_value == 1.0 and same.p_equiv == 0.0
    assert half_width_pct([5.0]) == math.inf
    assert math.isclose(half_width_pct([1300.0, 1000.0, 1400.0]), 55.1, abs_tol=1.0)


def test_holm_step_down() -> None:
    # m = 4: 0.01 ≤ 0.05/4, 0.015 ≤ 0.05/3, 0.03 > 0.05/2: stop there
    assert holm([0.03, 0.01, 0.2, 0.015], 0.05) == [False, True, False, True]
    assert holm([0.04], 0.05) == [True]
    assert holm([0.04, 0.04], 0.05) == [False, False]
    assert holm([math.nan, 0.04], 0.05) == [False, True]  # untested: not in the family


def test_answer_lines_for_the_new_statuses() -> None:
    from pytest_ppsweep.results.answers import EQUIVALENT, MEASURED, Answer, one_line

    same = Answer(kind="layout", workload="", question="q", objective=("input_tps",),
                  status=EQUIVALENT, ranking=("pp4", "pp8"),
                  extra={"equivalent": ["pp4", "pp8"], "text": "pp4 and pp8 are equivalent"})
    assert same.line == "layout[]: equivalent pp4, pp8"
    one = Answer(kind="layout", workload="", question="q", objective=("input_tps",),
                 status=MEASURED, answer="pp8", ranking=("pp8",))
    assert one.line == "layout[]: measured pp8"
    assert one_line([same.as_dict(), one.as_dict()]) == (
        "layout equivalent pp4 = pp8; layout measured pp8")


def test_extra_rounds_take_the_planned_rounds_variance() -> None:
    """Stein's two-stage level: a one-boot side with more rounds than planned (the spread
    rule's extra rounds) is tested with the mean of every round and the variance of its planned
    rounds alone, with their degrees of freedom."""
    rule = Rule(planned=3)
    a = [1000.0, 1030.0, 970.0, 1001.0, 999.0]  # planned rounds spread, extra rounds quiet
    b = [1000.0, 1001.0, 999.0]
    got = stein(levels(a), a, rule)
    assert got is not None
    first = [math.log(v) for v in a[:3]]
    assert got.var_mean == pytest.approx(statistics.variance(first) / 5) and got.df == 2.0
    assert got.mean == pytest.approx(statistics.fmean(math.log(v) for v in a))
    # narrower than the planned rounds alone, wider than every round's (biased) variance
    every = interval(a, b, Rule())
    two_stage = interval(a, b, rule)
    planned = interval(a[:3], b, Rule())
    assert every is not None and two_stage is not None and planned is not None
    assert every.half_width_pct < two_stage.half_width_pct < planned.half_width_pct
    # unchanged: no extra round, no plan known, two boots, sequential looks
    assert stein(levels(b), b, rule) == levels(b)
    assert stein(levels(a), a, Rule()) == levels(a)
    booted = Sample(a, ["x", "x", "x", "y", "y"])
    assert stein(levels(booted), booted, rule) == levels(booted)
    assert stein(levels(a), a, Rule(planned=3, first_look=3, last_look=8)) == levels(a)
