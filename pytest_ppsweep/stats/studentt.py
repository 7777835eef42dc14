"""Student's t distribution: its survival function and quantiles, for the decision test's Welch
interval (stats/decision.py), its sample sizes (stats/power.py) and the capacity's Fieller
interval (stats/capacity.py).

No dependency: the regularised incomplete beta function by continued fraction (modified Lentz),
the quantiles by Newton's method inside a bisection bracket; checked against scipy's values in
tests/stats/test_studentt.py.
"""

from __future__ import annotations

import functools
import math

__all__ = ["t_ppf", "t_sf"]


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def _t_pdf(t: float, df: float) -> float:
    return math.exp(math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0)
                    - 0.5 * math.log(df * math.pi)
                    - (df + 1.0) / 2.0 * math.log1p(t * t / df))


@functools.lru_cache(maxsize=4096)
def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (Newton's method on
    the survival function, kept inside a bisection bracket)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile {q!r} outside (0, 1)")
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    target = 1.0 - q
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > target:
        lo, hi = hi, hi * 2.0
    x = (lo + hi) / 2.0
    for _ in range(100):
        f = t_sf(x, df) - target  # decreasing in x
        if f > 0:
            lo = x
        else:
            hi = x
        step = f / _t_pdf(x, df)
        nxt = x + step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2.0
        if abs(nxt - x) < 1e-13 * max(1.0, abs(x)):
            return nxt
        x = nxt
    return x
