"""How many repeats (or boots × rounds) a comparison needs to separate a given gap with a stated
power under the decision test (stats/decision.py): the figures an answer's rerun advice and the
benchmarks quote.

``repeats_for``: rounds of one boot per point, by the normal approximation refined with t's
degrees of freedom. ``boots_for``: with rounds within boots (the decision's two levels), boots
per point and rounds per boot at Kalibera and Jones's cost optimum (module docstring of
stats/decision.py: two levels). Both use Holm's first step (α / family), the strictest.
"""

from __future__ import annotations

import math

from pytest_ppsweep.stats.decision import DEFAULT_RULE, Rule
from pytest_ppsweep.stats.studentt import t_ppf

__all__ = ["boots_for", "repeats_for"]


def repeats_for(gap_pct: float, sigma_pct: float, rule: Rule = DEFAULT_RULE,
                family: int = 1, power: float = 0.9) -> int:
    """Repeats per point that separate a true ``gap_pct`` at noise ``sigma_pct`` per repeat
    with ``power``, in a family of ``family`` comparisons (Holm's first step, the strictest:
    α / family), by the normal approximation refined with t's degrees of freedom."""
    if gap_pct <= 0 or sigma_pct <= 0:
        return 2
    delta, sigma = math.log1p(abs(gap_pct) / 100.0), math.log1p(sigma_pct / 100.0)
    level = rule.alpha / max(1, family)
    for n in range(2, 1000):
        df = 2.0 * (n - 1)
        need = (t_ppf(1.0 - level / 2.0, df) + t_ppf(power, df)) * sigma * math.sqrt(2.0 / n)
        if need <= delta:
            return n
    return 1000


def boots_for(gap_pct: float, within_pct: float, between_pct: float,
              rule: Rule = DEFAULT_RULE, family: int = 1, power: float = 0.9,
              max_rounds: int = 8, boot_cost_rounds: float = 10.0) -> tuple[int, int]:
    """Boots per point and rounds per boot that separate a true ``gap_pct`` with ``power`` when
    a round varies by ``within_pct`` inside its boot and a boot's mean by ``between_pct``
    (one σ each, in %), the boot as the unit (module docstring: two levels), in a family of
    ``family`` comparisons (Holm's first step, α / family).

    Rounds per boot: Kalibera and Jones's cost optimum √(c_boot σ²_within / (c_round
    σ²_between)), ``boot_cost_rounds`` = c_boot / c_round (a boot costs that many rounds),
    between 1 and ``max_rounds`` (``max_rounds`` when the boots do not differ). Then the fewest
    boots (at least 2) whose standard error √(2 (σ²_b + σ²_w / n) / k), with 2 (k − 1) degrees of
    freedom, reaches the power."""
    if gap_pct <= 0:
        return 2, max(1, max_rounds)
    delta = math.log1p(abs(gap_pct) / 100.0)
    sw = math.log1p(max(0.0, within_pct) / 100.0) if not math.isnan(within_pct) else 0.0
    sb = math.log1p(max(0.0, between_pct) / 100.0) if not math.isnan(between_pct) else 0.0
    if sb <= 0.0:
        rounds = max(1, max_rounds)
    else:
        best = math.sqrt(max(boot_cost_rounds, 0.0) * sw * sw / (sb * sb))
        rounds = min(max(1, max_rounds), max(1, round(best)))
    level = rule.alpha / max(1, family)
    for k in range(2, 1000):
        df = 2.0 * (k - 1)
        se = math.sqrt(2.0 * (sb * sb + sw * sw / rounds) / k)
        if (t_ppf(1.0 - level / 2.0, df) + t_ppf(power, df)) * se <= delta:
            return k, rounds
    return 1000, rounds
