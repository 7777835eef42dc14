"""The gate's noise rule: how large a change of a point's median must be to be more than noise.

Rule (stated in the README): the noise of a point's metric, in % of the reference median, is

    noise = K × median of { |v − m_run| / m_run × 100 : every valid repeat v of either run,
                            m_run the median of that run's repeats, the median repeat itself
                            left out when the run has an odd number of repeats }

with ``K`` = :data:`NOISE_K`. A change whose size exceeds it is beyond noise.

Why this and not the larger (max − min)/median spread of the two runs, the earlier rule: with
three repeats the range is the spread of the *most extreme* round, and on a shared machine one
round in ten is an outlier several times the others (a neighbour's job, a page-cache flush).
The larger of two ranges is therefore often 3-8× the typical spread: a real 5 % slowdown then
reads "within noise" (77 % detection in benchmarks/bench_gate.py), while between-run drifts
that the range of one run does not see crossed it in 7.5 % of same-image reruns. The median
absolute deviation from each run's own median pools both runs (four distances with three
repeats each) and ignores the single most extreme round: it is a robust estimate of one
repeat's spread (for normal noise, ≈ 0.6-0.7 σ with three repeats). ``K`` turns it into the
size a same-image rerun's difference of medians stays below: it was calibrated on the emulator
with benchmarks/bench_gate.py (the false-alarm and detection rates are in docs/RELIABILITY.md)
and is large enough to cover the run-to-run drift that repeats of one run do not show.

With fewer than two valid repeats in both runs there is nothing to estimate: the noise is 0
(every change is beyond it), as before.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

NOISE_K = 6.0
RULE = ("noise = 6 × the median, over both runs' valid repeats, of each repeat's distance "
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
