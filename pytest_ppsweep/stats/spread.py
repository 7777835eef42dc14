"""The spread rule: how far a point's repeats disagree, and whether a booted layout should
run another round of a point before it is torn down (adaptive repeats).

spread = (max − min) / median, in %, of the point's primary metric (results/objective.py) over
the ``keep`` valid rounds nearest the median of all its valid rounds (``keep``: run.json
``min_repeats``, the planned repeats by default); for a point measured on several boots
(``[sweep] boots``, a resume), the largest such spread within one boot (:func:`boot_spread_pct`).
With exactly the planned rounds that is every round, the rule as it always was; extra rounds can
only take an outlier round out of it (the threshold is the same), and every round, extra or not,
stays in the medians and the noise rule.

Adaptive repeats: after the planned rounds of a point, while its spread exceeds the threshold
and it has fewer than ``[sweep] max_repeats`` rounds, the layout runs one more round.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

DEFAULT_MAX_REPEATS = 8


def spread_pct(values: Sequence[float], keep: int = 0) -> float:
    """The spread in % of the ``keep`` values nearest the median (all when ``keep`` is 0 or
    there are no more); NaN without values or with a zero median."""
    clean = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not clean:
        return math.nan
    med = statistics.median(clean)
    if not med:
        return math.nan
    if 0 < keep < len(clean):
        clean = sorted(clean, key=lambda v: (abs(v - med), v))[:keep]
    return (max(clean) - min(clean)) / abs(med) * 100.0


def boot_spread_pct(values: Sequence[float], boots: Sequence[str], keep: int = 0) -> float:
    """The spread rule on a point whose rounds may come from several boots (results.csv
    ``boot``, aligned with ``values``): the largest spread within one boot, over the boots with
    two rounds or more (NaN when none has two: a point of single-round boots has no spread
    within a boot). Boots differ by more than rounds do, and that difference is the decision's
    second level (stats/decision.levels), not a fault of the measurement that this rule looks
    for. One boot (or no boot ids): :func:`spread_pct` of all the values, as always."""
    groups: dict[str, list[float]] = {}
    for value, boot in zip(values, boots, strict=True):
        groups.setdefault(str(boot or ""), []).append(value)
    if len(groups) < 2:
        return spread_pct(values, keep)
    each = [s for g in groups.values() if len(g) >= 2 and not math.isnan(s := spread_pct(g))]
    return max(each) if each else math.nan


def more_rounds(values: Sequence[float], planned: int, threshold_pct: float, max_repeats: int,
                keep: int = 0) -> str | None:
    """Why one more round of this point is wanted (its spread over the limit, rounds left), or
    None: within the limit, not all planned rounds done yet, or ``max_repeats`` reached."""
    done = len(values)
    if done < planned or done >= max_repeats:
        return None
    spread = spread_pct(values, keep or planned)
    if math.isnan(spread) or spread <= threshold_pct:
        return None
    return (f"spread {spread:.2f} % > {threshold_pct:.2f} % after {done} round(s); "
            f"up to {max_repeats}")
