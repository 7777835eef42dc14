"""The gate's noise rule (stats/gatenoise.py): 5 × the median distance of a repeat from its own
run's median, over both runs; one extreme round does not set it, unlike the earlier larger
range."""

from __future__ import annotations

import pytest

from pytest_ppsweep.stats.gatenoise import NOISE_K, deviations_pct, noise_pct


def test_the_median_repeat_of_an_odd_run_is_left_out() -> None:
    assert deviations_pct([99.0, 100.0, 101.0]) == pytest.approx([1.0, 1.0])
    assert deviations_pct([99.0, 101.0]) == pytest.approx([1.0, 1.0])  # median 100
    assert deviations_pct([100.0]) == [] and deviations_pct([0.0, 0.0]) == []


def test_noise_is_k_times_the_median_distance_over_both_runs() -> None:
    ref, cur = [99.0, 100.0, 101.0], [198.0, 200.0, 202.0]  # 1 % from the median in both
    assert NOISE_K == 5.0
    assert noise_pct(ref, cur) == pytest.approx(5.0)
    assert noise_pct(ref, cur, k=3) == pytest.approx(3.0)


def test_one_extreme_round_does_not_set_the_noise() -> None:
    quiet = [99.8, 100.0, 100.2]
    outlier = [92.0, 100.0, 100.2]  # one round 8 % low: the earlier rule's noise was 8.2 %
    assert noise_pct(quiet, outlier) == pytest.approx(5 * 0.2)
    # two of the four distances large: the noise follows (a run that is noisy throughout)
    assert noise_pct([92.0, 100.0, 108.0], outlier) > 5 * 4


def test_too_few_repeats_give_no_noise() -> None:
    assert noise_pct([100.0], [101.0]) == 0.0
    assert noise_pct([], []) == 0.0
