"""The SLO capacity as an interval with its confidence, from every probe of a search (pure).

A percentile limit "p<q> ≤ L" is met while the share of requests over ``L`` is at most the
allowance ``a = 1 − q/100``. That share rises with the load, so the capacity is the load where
it crosses ``a``. Each probe measured it: ``over`` of ``n`` judged requests (the warm-up and the
drain left out, measure/withinslo.py). A single verdict per probe (within / outside / unproven)
throws most of that away; this module uses all of it:

* **the fit**: a logistic curve of the share against log load, ``logit(share) = α + β·ln(load)``,
  fitted by maximum likelihood (binomial, iteratively reweighted least squares) to the probes
  near the crossing (within :data:`WINDOW` × of the estimate either way: far probes are all 0 or
  all 1 and the curve need not hold there). Half a request is added over and under at each probe
  (Haldane's correction) so that a probe of 0 of n or n of n never drives the fit to infinity;
* **the point**: ``exp((logit(a) − α) / β)``, the load where the fitted share is ``a``;
* **the interval**: Fieller's for that ratio (the loads where ``α + β·ln(load)`` is within ``t``
  standard errors of ``logit(a)``), at the SLO's ``confidence`` (two-sided), with a Student t
  quantile on ``m − 2`` degrees of freedom (``m`` probes in the window). Requests of one probe are
  not independent (a queue that is long stays long: at 80 % utilisation the share of one probe of
  1,000 requests varies as much as ~30 independent ones), so the binomial variance is scaled by
  the dispersion the probes themselves show: Pearson's χ² over ``m − 2`` (a quasi-binomial fit; at
  least 1). Without three probes at distinct loads in the window, or with a curve that does not
  rise, there is no interval (:func:`estimate` returns None) and the search probes on.

The estimate speaks for the percentile limits only (the lowest capacity over them binds); the N/N
rule, per-request limits and the client's schedule are judged per probe by the bracket, whose low
end the outcome still states. The interval's coverage is measured, not assumed:
benchmarks/bench_slo_capacity.py runs the search on a queue model whose true capacity is known.
The search that refines it, and slo_probes.csv's counts it is refitted from, are
results/slocapacity.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pytest_ppsweep.stats.studentt import t_ppf

__all__ = ["WINDOW", "Capacity", "Share", "binding", "estimate", "next_load", "ratio_interval"]

WINDOW = 1.5  # probes within this factor of the estimate (either way) enter the fit


@dataclass(frozen=True)
class Share:
    """What one probe measured of one percentile limit: ``over`` of ``n`` requests over it."""

    load: float
    over: int
    n: int


@dataclass(frozen=True)
class Capacity:
    """The load where the share over the limit crosses its allowance: ``point`` in
    [``low``, ``high``] at ``confidence``, from ``probes`` probes."""

    point: float
    low: float
    high: float
    confidence: float
    probes: int
    dispersion: float
    requests: int = 0  # judged requests of the probes in the fit

    @property
    def half_width_pct(self) -> float:
        """The larger distance from the point to an end, in % of the point."""
        return max(self.point - self.low, self.high - self.point) / self.point * 100.0

    def text(self, unit: str) -> str:
        return (f"{self.point:.3g} {unit} ({self.confidence:.0%} interval {self.low:.3g}-"
                f"{self.high:.3g} {unit}, ±{self.half_width_pct:.0f} %, from {self.probes} "
                "probes)")


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _fit(x: np.ndarray, k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(α, β), their covariance (binomial) and Pearson's χ² of the logistic fit."""
    design = np.column_stack([np.ones_like(x), x])
    y = (k + 0.5) / (n + 1.0)
    coef: np.ndarray = np.zeros(2)
    for _ in range(50):
        eta = design @ coef
        mu = 1.0 / (1.0 + np.exp(-eta))
        w = (n + 1.0) * mu * (1.0 - mu)
        z = eta + (y - mu) / np.maximum(mu * (1.0 - mu), 1e-12)
        info = design.T @ (design * w[:, None])
        new: np.ndarray = np.linalg.solve(info, design.T @ (w * z))
        if np.max(np.abs(new - coef)) < 1e-10:
            coef = new
            break
        coef = new
    mu = 1.0 / (1.0 + np.exp(-(design @ coef)))
    w = (n + 1.0) * mu * (1.0 - mu)
    cov = np.linalg.inv(design.T @ (design * w[:, None]))
    # Pearson's χ² on the counts as measured, not on the Haldane-corrected shares: a probe of
    # n of n over, far up a steep curve (μ ≈ 1), fits it; against (n + ½)/(n + 1) it would add
    # thousands (½ a request over 1 − μ ≈ 0) and blow the dispersion up
    chi2 = float(np.sum((k - n * mu) ** 2 / np.maximum(n * mu * (1.0 - mu), 1e-12)))
    return coef, cov, chi2


def _one(shares: Sequence[Share], allowance: float, confidence: float,
         centre: float) -> Capacity | None:
    near = [s for s in shares if s.n > 0 and centre / WINDOW <= s.load <= centre * WINDOW]
    if len({s.load for s in near}) < 2 or len(near) < 3:
        return None
    x = np.log(np.array([s.load for s in near]))
    k = np.array([float(s.over) for s in near])
    n = np.array([float(s.n) for s in near])
    try:
        (alpha, beta), cov, chi2 = _fit(x, k, n)
    except np.linalg.LinAlgError:
        return None
    if not beta > 0:
        return None
    dof = len(near) - 2
    dispersion = max(1.0, chi2 / dof)
    target = _logit(allowance)
    t = t_ppf(0.5 + confidence / 2.0, dof)
    # Fieller: the x where (α + βx − target)² ≤ t²·φ·var(α + βx), a quadratic A x² + B x + C ≤ 0
    q = t * t * dispersion
    a2 = beta * beta - q * cov[1, 1]
    b2 = 2.0 * (beta * (alpha - target) - q * cov[0, 1])
    c2 = (alpha - target) ** 2 - q * cov[0, 0]
    disc = b2 * b2 - 4.0 * a2 * c2
    if not a2 > 0 or not disc >= 0:
        return None  # the slope is not known well enough: the interval is unbounded
    root = math.sqrt(disc)
    lo, hi = (-b2 - root) / (2.0 * a2), (-b2 + root) / (2.0 * a2)
    at = (target - alpha) / beta
    if not all(abs(v) < 50 for v in (lo, hi, at)):
        return None
    return Capacity(point=math.exp(at), low=math.exp(lo), high=math.exp(hi),
                    confidence=confidence, probes=len(near), dispersion=dispersion,
                    requests=int(n.sum()))


def estimate(shares: Sequence[Share], allowance: float, confidence: float) -> Capacity | None:
    """The capacity from ``shares`` (one limit's, every probe), or None while the probes cannot
    place it: the fit is redone on the window around its own estimate until it settles."""
    centre = next_load(shares, allowance)
    if centre is None:
        return None
    found: Capacity | None = None
    for _ in range(5):
        found = _one(shares, allowance, confidence, centre)
        if found is None or math.isclose(found.point, centre, rel_tol=1e-6):
            break
        centre = found.point
    return found


def binding(shares: Mapping[str, Sequence[Share]], limits: Mapping[str, float],
            confidence: float, interval_at: float | None = None) -> Capacity | None:
    """The binding limit's capacity: the lowest estimate at ``confidence`` over the percentile
    limits (``limits``: key → allowance; a limit whose share never crossed its allowance binds
    nothing). With ``interval_at``, that same limit's capacity with its interval at that
    confidence instead (None: the probes do not bound it there; a limit that binds at the
    search's confidence binds whatever level its interval is asked at)."""
    found = [(c, key) for key, allowance in limits.items()
             if (c := estimate(shares.get(key, []), allowance, confidence))]
    if not found:
        return None
    cap, key = min(found, key=lambda f: f[0].point)
    if interval_at is None or interval_at == confidence:
        return cap
    return estimate(shares.get(key, []), limits[key], interval_at)


def ratio_interval(a: Capacity, b: Capacity) -> tuple[float, float, float]:
    """The ratio ``a/b`` of two capacities: (estimate, low, high), from their two intervals
    (each at the same confidence, which this interval then has), by MOVER ("method of variance
    estimates recovery", Zou and Donner 2008) on the log scale: each end is the log ratio plus
    or minus the root of the two estimates' squared distances to their own ends on that side
    (Fieller's intervals are asymmetric: each side keeps its own). It takes the two estimates as
    independent: two layouts, or two runs, fitted on probes of their own. Where they share
    arrival schedules (common random numbers) their errors are positively correlated, which
    only makes the true interval of the ratio narrower: the one given is conservative."""
    est = math.log(a.point / b.point)
    down = math.hypot(math.log(a.point / a.low), math.log(b.high / b.point))
    up = math.hypot(math.log(a.high / a.point), math.log(b.point / b.low))
    return math.exp(est), math.exp(est - down), math.exp(est + up)


def next_load(shares: Sequence[Share], allowance: float) -> float | None:
    """Where the crossing lies by the probes' own shares, before any fit: the geometric mean of
    the highest load measured at or below the allowance and the lowest above it, each the
    nearest to the other (None without a load on each side)."""
    under = [s.load for s in shares if s.n and s.over / s.n <= allowance]
    over = [s.load for s in shares if s.n and s.over / s.n > allowance]
    if not under or not over:
        return None
    hi = min(over)
    below = [u for u in under if u < hi]
    lo = max(below) if below else min(under)
    return math.sqrt(lo * hi)
