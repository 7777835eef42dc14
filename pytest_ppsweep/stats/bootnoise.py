"""The boot-to-boot variance measured across runs: configurations that earlier runs booted once
each, several times over, pooled into one estimate with its degrees of freedom.

Each earlier run of an unchanged configuration is one boot of it. A point's mean log value
differs between runs by the boot's offset plus the noise of its own rounds, so over ``k`` runs
of one point the variance of those means estimates

    σ²_between + mean_i(s²_i / n_i)

(``s²_i`` the variance of run ``i``'s log values over its ``n_i`` rounds). The point's estimate
of σ²_between is that variance less the mean within-run share, with ``k − 1`` degrees of
freedom: a method-of-moments estimate (one-way random effects with unequal rounds per run, as
stats/decision.levels does within one run). A configuration measured at several concurrencies
gives one estimate, the mean over its Cs, with the fewest runs of any C: the Cs of one boot
share its offset, so they are not independent evidence. Estimates are pooled over
configurations weighted by their degrees of freedom and the pool is floored at 0, as
stats/decision.pooled_between pools a run's own repeated boots. The degrees of freedom are the
pool's Σ (k − 1): the within share is subtracted as if known, which it nearly is beside the
between share when rounds are many and boots few (Satterthwaite would give fewer).

Who uses it: the run history (gate/history.py) wires it to the runs of one cluster, image and
engine; the close of a run stores the result in run.json (``compare.boot_history``), and the
decisions take it as a source of the boot level (results/questions.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["BetweenRuns", "RunMean", "between_runs"]


@dataclass(frozen=True)
class RunMean:
    """One run's view of one point: the mean and variance of its rounds' log values, and how
    many rounds."""

    mean: float
    var: float
    n: int


@dataclass(frozen=True)
class BetweenRuns:
    """The pooled between-boot variance (log scale), its degrees of freedom, and how many
    configurations gave it."""

    var: float
    df: float
    configurations: int


def _one_c(runs: Sequence[RunMean]) -> float | None:
    """σ²_between of one point at one C from its runs (None with fewer than two)."""
    usable = [r for r in runs if r.n >= 2 and math.isfinite(r.mean) and math.isfinite(r.var)]
    if len(usable) < 2:
        return None
    spread = statistics.variance([r.mean for r in usable])
    within = statistics.fmean(r.var / r.n for r in usable)
    return spread - within


def between_runs(points: Mapping[str, Mapping[int, Sequence[RunMean]]]) -> BetweenRuns | None:
    """The pooled estimate over ``points`` (configuration → C → its runs), or None when no
    configuration has two runs of two rounds or more at some C."""
    total = weight = 0.0
    used = 0
    for per_c in points.values():
        found = [(est, sum(r.n >= 2 for r in runs)) for runs in per_c.values()
                 if (est := _one_c(runs)) is not None]
        if not found:
            continue
        df = min(k for _, k in found) - 1.0
        total += df * statistics.fmean(est for est, _ in found)
        weight += df
        used += 1
    if not used or weight <= 0:
        return None
    return BetweenRuns(max(0.0, total / weight), weight, used)
