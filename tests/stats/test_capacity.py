"""The SLO capacity estimate (stats/capacity.py): the load where the share of requests over a
percentile limit crosses its allowance, fitted across every probe, with its interval, and the
ratio of two capacities. Pure: synthetic shares with a known crossing, seconds."""

from __future__ import annotations

import math
import random

import pytest

from pytest_ppsweep.stats.capacity import Capacity, Share, estimate, next_load, ratio_interval

TRUE = 2.0  # req/s where the share over the limit is 0.5


def share_at(load: float, slope: float = 8.0) -> float:
    """A share over the limit that crosses 0.5 at TRUE, logistic in log load."""
    return 1.0 / (1.0 + math.exp(-slope * math.log(load / TRUE)))


def drawn(load: float, n: int, rng: random.Random) -> Share:
    p = share_at(load)
    return Share(load, sum(rng.random() < p for _ in range(n)), n)


def test_the_crossing_of_exact_shares_is_found_with_an_interval_around_it() -> None:
    shares = [Share(x, round(1000 * share_at(x)), 1000) for x in (1.7, 1.85, 2.0, 2.15, 2.4)]
    cap = estimate(shares, 0.5, 0.95)
    assert cap is not None
    assert cap.point == pytest.approx(TRUE, rel=0.01)
    assert cap.low < TRUE < cap.high and cap.half_width_pct < 5
    assert cap.probes == 5 and cap.dispersion >= 1.0
    assert cap.text("req/s").startswith("2 req/s (95% interval ")


def test_no_estimate_without_a_crossing_or_without_enough_probes() -> None:
    under = [Share(x, 0, 100) for x in (1.0, 1.5, 1.9)]
    assert estimate(under, 0.5, 0.95) is None and next_load(under, 0.5) is None
    two = [Share(1.8, 30, 100), Share(2.2, 70, 100)]
    assert estimate(two, 0.5, 0.95) is None  # two points leave no degree of freedom
    assert next_load(two, 0.5) == pytest.approx(math.sqrt(1.8 * 2.2))
    flat = [Share(1.8, 50, 100), Share(2.0, 10, 100), Share(2.2, 60, 100), Share(1.9, 90, 100)]
    assert estimate(flat, 0.5, 0.95) is None  # the slope is not known: Fieller's is unbounded


def test_the_interval_covers_the_truth_at_about_its_confidence() -> None:
    """Independent requests at five loads around the crossing, 300 draws: the 90 % interval
    covers TRUE in at least 85 % of them (3 standard errors of 300 draws below 90 %; it is
    conservative here, as the dispersion is never taken below the binomial's), and it is not
    covering by being wide: ±6 % or less in most draws."""
    rng = random.Random(7)
    covered = found = narrow = 0
    for _ in range(300):
        cap = estimate([drawn(x, 60, rng) for x in (1.7, 1.85, 2.0, 2.15, 2.4)], 0.5, 0.90)
        if cap is not None:
            found += 1
            covered += cap.low <= TRUE <= cap.high
            narrow += cap.half_width_pct <= 6.0
    assert found >= 290 and narrow / found >= 0.75, (found, narrow)
    assert covered / found >= 0.85, covered / found


def test_the_slo_guides_worked_example() -> None:
    """docs/guides/slo.md, "The capacity, with its confidence": seven probes of 160 judged
    requests."""
    shares = [Share(0.36, 32, 160), Share(0.40, 72, 160), Share(0.42, 48, 160),
              Share(0.44, 61, 160), Share(0.46, 99, 160), Share(0.49, 128, 160),
              Share(0.40, 40, 160)]
    cap = estimate(shares, 0.5, 0.95)
    assert cap is not None
    assert (round(cap.point, 3), round(cap.low, 3), round(cap.high, 2)) == (0.439, 0.413, 0.49)
    assert round(cap.dispersion, 1) == 8.4 and round(cap.half_width_pct) == 12
    assert round(cap.point / 1.1, 3) == 0.4 and round(cap.point * 1.1, 3) == 0.483


def test_the_ratio_of_two_capacities_has_an_interval_from_theirs() -> None:
    """MOVER on the log scale: the ratio's ends from each estimate's own distances to its ends
    (asymmetric intervals keep their sides); equal intervals give a ratio interval around 1
    narrower than their non-overlap would need (√2 × one width, not 2 ×)."""
    a = Capacity(point=2.0, low=1.8, high=2.4, confidence=0.95, probes=5, dispersion=1.0)
    b = Capacity(point=1.0, low=0.9, high=1.1, confidence=0.95, probes=5, dispersion=1.0)
    est, low, high = ratio_interval(a, b)
    assert est == pytest.approx(2.0)
    assert low == pytest.approx(2.0 * math.exp(-math.hypot(math.log(2 / 1.8), math.log(1.1))))
    assert high == pytest.approx(2.0 * math.exp(math.hypot(math.log(2.4 / 2), math.log(1 / .9))))
    same = ratio_interval(b, b)
    assert same[1] < 1 < same[2] and math.log(same[2]) < 2 * math.log(1.1)


def test_probes_every_request_over_far_up_a_steep_curve_do_not_blow_the_dispersion_up() -> None:
    """The emulated PP8 under TTFT p50 ≤ 20 s: a step from a few over at 0.49-0.53 req/s to all
    over (overloaded) from 0.56. Pearson's χ² against the Haldane-corrected share made the
    0.72 req/s probe (57 of 57 over, μ ≈ 1) add ~3,900, the dispersion 281 and no interval."""
    shares = ([Share(0.494, k, 57) for k in (4, 0, 0, 0, 3, 0, 0, 0)]
              + [Share(0.526, 8, 57), Share(0.561, 57, 57), Share(0.723, 57, 57)]
              + [Share(0.597, 57, 57)] * 7)
    cap = estimate(shares, 0.5, 0.95)
    assert cap is not None and cap.dispersion < 5.0, cap
    assert 0.526 < cap.point < 0.561
