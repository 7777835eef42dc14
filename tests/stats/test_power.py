"""The repeats a stated power needs (stats/power.py); boots × rounds with two levels are in
tests/stats/test_decision_boots.py."""

from __future__ import annotations

from pytest_ppsweep.stats.decision import DEFAULT_RULE
from pytest_ppsweep.stats.power import repeats_for


def test_repeats_for_a_stated_power() -> None:
    # 2 % gap at σ = 1 %: the textbook (z_.975 + z_.9)² · 2σ²/δ² ≈ 5.3, t's tails add a little
    n = repeats_for(2.0, 1.0, DEFAULT_RULE)
    assert 6 <= n <= 8
    assert repeats_for(2.0, 1.0, DEFAULT_RULE, family=4) > n  # Holm's α / 4
    assert repeats_for(1.0, 1.0) > repeats_for(2.0, 1.0) > repeats_for(5.0, 1.0)
