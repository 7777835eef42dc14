"""Bounds of a share from ``k`` successes of ``n`` trials: the exact one-sided Clopper-Pearson
bounds that prove an SLO percentile (measure/withinslo.py), the fewest trials that can prove
one, the dispersion that discounts trials which are not independent, and Wilson's two-sided
score interval of an accuracy score (results/accuracy.py). Pure, stdlib only.

**Clopper-Pearson** (:func:`binomial_bounds`): the exact binomial bounds, one-sided at
``confidence`` each, by bisection on the binomial distribution function summed in log space
(exact for the n of a probe). A percentile "p<q> ≤ L" is proven when the upper bound of the share
of requests over ``L`` is within the allowance ``1 − q/100``, as MLPerf LoadGen's early stopping
bounds a latency percentile; :func:`min_requests` is the fewest requests that can prove it with
none over (p50: 5, p90: 29, p99: 299 at 95 %).

**Dispersion** (:func:`dispersion`): requests of one probe are not independent (a queue that is
long stays long, so the requests over a limit come in runs), and their share varies more than a
binomial's. Batch means measure by how much: the requests in arrival order cut into batches of
⌊√n⌋, φ = the variance of the batches' shares over the binomial's for that batch size, at least
1. The bounds are then taken over ``n / φ`` effective trials. φ cannot be seen where every
trial or none is a success (it is 1 there), nor beyond the batch size: it is the least the
sample itself shows.

**Wilson** (:func:`wilson`): the score interval of a share at a two-sided level; unlike the
normal interval it stays inside [0, 1] and is not empty at 0 or n successes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

__all__ = ["MIN_BATCHES", "binomial_bounds", "dispersion", "min_requests", "wilson"]


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p), summed in log space (exact for the n of a probe)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                          + i * lp + (n - i) * lq)
    return min(total, 1.0)


def _solve(f: Callable[[float], float], target: float) -> float:
    """The p in [0, 1] where the decreasing ``f(p)`` crosses ``target`` (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def binomial_bounds(k: int, n: int, confidence: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds of a share from ``k`` of ``n``: (lower, upper), each at
    ``confidence`` (lower: P(X ≥ k | p) = 1 − c; upper: P(X ≤ k | p) = 1 − c)."""
    if n <= 0:
        return 0.0, 1.0
    tail = 1.0 - confidence
    upper = 1.0 if k >= n else _solve(lambda p: _binom_cdf(k, n, p), tail)
    lower = 0.0 if k <= 0 else 1.0 - _solve(lambda q: _binom_cdf(n - k, n, q), tail)
    return lower, upper


def min_requests(percentile: int, confidence: float) -> int:
    """The fewest requests that can prove "p<percentile> ≤ L" at ``confidence``: with none over
    the limit, the upper bound ``1 − (1 − c)^(1/n)`` falls to the allowance ``1 − q/100``."""
    allowed = 1.0 - percentile / 100.0
    return math.ceil(math.log(1.0 - confidence) / math.log(1.0 - allowed) - 1e-12)


MIN_BATCHES = 5  # fewer batches than this give no variance worth the name: φ = 1


def dispersion(over: Sequence[bool]) -> float:
    """How many times the variance of the share over a limit exceeds the binomial's, from one
    probe's requests in arrival order (``over``: each one over the limit or not): batch means
    over batches of ⌊√n⌋ requests (the last, partial one left out), the batches' sample variance
    × the batch size / (p (1 − p)); at least 1, and 1 when it cannot be seen (every request or
    none over, fewer than :data:`MIN_BATCHES` batches)."""
    n = len(over)
    size = math.isqrt(n)
    batches = n // size if size else 0
    if batches < MIN_BATCHES:
        return 1.0
    used = [bool(v) for v in over[:batches * size]]
    p = sum(used) / len(used)
    if p <= 0.0 or p >= 1.0:
        return 1.0
    means = [sum(used[i * size:(i + 1) * size]) / size for i in range(batches)]
    var = sum((m - p) ** 2 for m in means) / (batches - 1)
    return max(1.0, var * size / (p * (1.0 - p)))


def wilson(correct: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of ``correct`` out of ``n`` at ``level`` (two-sided)."""
    if n < 1 or not 0 <= correct <= n:
        raise ValueError(f"expected 0 ≤ correct ≤ n and n ≥ 1, found {correct}/{n}")
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
