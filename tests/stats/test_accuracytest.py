"""The accuracy check's statistics (stats/accuracytest.py): the sample size, the threshold,
the detectable drop and Wilson's interval, against values computed independently."""

from __future__ import annotations

import math
import random

import pytest

from pytest_ppsweep.stats import accuracytest as st


def test_the_defaults_ask_3435_questions() -> None:
    """θ = 3 points, α = 5 %, β = 20 %, σ = 0.5: 2·0.25·(1.6449 + 0.8416)²/0.03² = 3434.8."""
    assert st.questions_for(0.03, 0.05, 0.2) == 3435
    assert st.questions_for(0.10, 0.05, 0.2) == 310  # a drop 10/3 larger: (10/3)² fewer
    assert st.questions_for(0.03, 0.01, 0.2) > 3435  # a smaller α asks more
    assert st.questions_for(0.03, 0.05, 0.1) > 3435  # a smaller β asks more


def test_n_and_the_detectable_drop_are_inverse() -> None:
    n = st.questions_for(0.05, 0.05, 0.2)
    assert st.detectable_drop(n, 0.05, 0.2) <= 0.05 < st.detectable_drop(n - 1, 0.05, 0.2)


def test_the_threshold_is_the_reference_minus_the_one_sided_margin() -> None:
    # 1.6449 · 0.5 · √(2/100) = 0.1163
    assert st.threshold(0.8, 100, 100, 0.05) == pytest.approx(0.8 - 0.11631, abs=1e-4)
    assert st.significantly_worse(0.68, 100, 0.8, 100, 0.05)
    assert not st.significantly_worse(0.69, 100, 0.8, 100, 0.05)
    # unequal n: the margin uses both
    assert st.threshold(0.8, 50, 200, 0.05) == pytest.approx(
        0.8 - 1.64485 * 0.5 * math.sqrt(1 / 50 + 1 / 200), abs=1e-4)


def test_the_false_fail_rate_is_at_most_alpha_by_simulation() -> None:
    """Two layouts of one model (the same true score): the test fails at most α of the time,
    at any score (σ = 0.5 is the worst case)."""
    rng = random.Random(7)
    n = 200
    for p in (0.5, 0.9, 0.99):
        fails = sum(
            st.significantly_worse(sum(rng.random() < p for _ in range(n)) / n, n,
                                   sum(rng.random() < p for _ in range(n)) / n, n, 0.05)
            for _ in range(600))
        assert fails / 600 <= 0.05 + 0.025, (p, fails)


def test_a_drop_of_theta_is_caught_with_power_one_minus_beta_by_simulation() -> None:
    rng = random.Random(11)
    theta, alpha, beta = 0.15, 0.05, 0.2
    n = st.questions_for(theta, alpha, beta)
    caught = sum(
        st.significantly_worse(sum(rng.random() < 0.5 - theta for _ in range(n)) / n, n,
                               sum(rng.random() < 0.5 for _ in range(n)) / n, n, alpha)
        for _ in range(500))
    assert caught / 500 >= 1 - beta - 0.05, caught


def test_the_plan_says_why_and_what_n_detects() -> None:
    derived = st.plan(0.10, 0.05, 0.2, available=1000)
    assert (derived.n, derived.why) == (310, "derived")
    short = st.plan(0.03, 0.05, 0.2, available=40)
    assert short.n == 40 and short.wanted == 3435 and short.why.startswith("all the task file")
    assert "detects a drop of 27.8 points" in short.line() and "n = 40 questions" in short.line()
    fixed = st.plan(0.03, 0.05, 0.2, available=40, questions=12)
    assert (fixed.n, fixed.why) == (12, "set by questions")
    with pytest.raises(ValueError, match="theta"):
        st.questions_for(0.0, 0.05, 0.2)
