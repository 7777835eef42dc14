"""The gate's calibrated noise rule: how large a change of a point's median must be to be more
than noise, between two runs.

Who uses it: the gate (gate/comparison.py) and the SLO answer's per-GPU check
(results/sloanswer.py). Decisions inside one run do not: they use the decision test of
stats/decision.py, which narrows with repeats and states its error rate. The gate keeps this
calibrated rule, beside that test and not folded into it, because it compares two runs, two
boots apart: the drift between boots is in neither run's repeats, and an interval built from one
boot's rounds would be too narrow for it (K = 5 was set against it, and the gate's false-alarm
and detection rates are measured on this rule: benchmarks/bench_gate.py). The gate states the
two runs' spread as a second level beside it (gate/comparison.py, stats/decision.levels).

Rule (stated in docs/guides/gating.md): the noise of a point's metric, in % of the reference
median, is

    noise = K × median of { |v − m_run| / m_run × 100 : every valid repeat v of either run,
                            m_run the median of that run's repeats, the median repeat itself
                            left out when the run has an odd number of repeats }

with ``K`` = :data:`NOISE_K`. A change whose size exceeds it is beyond noise.

Why this and not the larger (max − min)/median spread of the two runs, the earlier rule: with
three repeats the range is the spread of the *most extreme* round, and on a shared machine one
round in ten is an outlier several times the others (a neighbour's job, a page-cache flush).
The larger of two ranges then sets the noise from that one round (a real 5 % slowdown read
"within noise"), while a quiet pair of runs gets a noise smaller than the drift between runs
(6-7.5 % false alarms over same-image reruns in benchmarks/bench_gate.py). The median distance
from each run's own median pools both runs (four distances with three repeats each) and ignores
the single most extreme round. For independent normal noise of σ per repeat and three repeats
per run it is ≈ 0.76 σ on average, and the difference of the two medians has a standard
deviation of ≈ 0.94 σ, so K = 5 is ≈ 4 standard deviations: 2.4 % of same-image comparisons
cross it by chance (simulated), leaving room for the run-to-run drift that repeats of one run
do not show. Measured on the emulator (docs/RELIABILITY.md, section 5): 2.5 % false alarms on
a quiet machine, and a detection of 2/5/10 % compute slowdowns within the goals; on a machine
loaded 7-10× its cores, both rules cry wolf more often (the drift between runs grows).

With fewer than two valid repeats in both runs there is nothing to estimate: the noise is 0
(every change is beyond it), as before.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

NOISE_K = 5.0
NOISE_RULE = ("noise = 5 × the median, over both runs' valid repeats, of each repeat's distance "
        "from its own run's median, in % (the median repeat of an odd run left out)")


def deviations_pct(values: Sequence[float]) -> list[float]:
    """Each value's distance from the values' median, in % of that median; the median value
    itself is left out when there is an odd number of values (its distance is 0 by
    construction, not a measurement)."""
    if len(values) < 2:
        return []
    med = statistics.median(values)
    if not med:
        return []
    ordered = sorted(values)
    if len(ordered) % 2:
        ordered.pop(len(ordered) // 2)
    return [abs(v - med) / abs(med) * 100.0 for v in ordered]


def noise_pct(ref: Sequence[float], cur: Sequence[float], k: float = NOISE_K) -> float:
    """The noise of one point's metric (``ref``/``cur``: its valid repeats in each run), in %."""
    dev = deviations_pct(ref) + deviations_pct(cur)
    return k * statistics.median(dev) if dev else 0.0
