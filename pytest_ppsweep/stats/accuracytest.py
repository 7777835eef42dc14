"""The accuracy check's test: how many questions, and the pass threshold of a score against a
reference score. Pure functions, stdlib only (:class:`statistics.NormalDist` gives the normal
quantiles).

**The test.** A layout's score ``p̂`` (the fraction of ``n`` questions answered right) is
compared with a reference score ``p̂_ref`` measured on ``n_ref`` questions (the baseline image's
score under the gate, the run's reference layout within a sweep): one-sided, at false-fail rate
α, it fails when

    p̂ < p̂_ref − z(1−α) · σ · √(1/n + 1/n_ref)

the normal approximation of the difference of two binomial proportions. σ is the per-question
standard deviation, taken at its worst case σ = 0.5 (a score of 50 %): the threshold never
falsely fails more often than α, whatever the model's score, and it does not collapse to "no
question may be missed" when the reference scores 100 %. This is TensorRT-LLM's accuracy
suite's hypothesis test (tests/integration/defs/accuracy/accuracy_core.py:
``compute_threshold`` with ``scale = √(2σ²/n)``, ``compute_theta``), with σ for a 0/1 score.

**The sample size.** To detect a drop of θ with miss rate β at that α (both sides asking n):

    n = ⌈ 2 σ² (z(1−α) + z(1−β))² / θ² ⌉

θ = 3 points, α = 5 %, β = 20 % ask 3,435 questions. A task file with fewer questions gives
fewer: :func:`plan` says the drop that n can detect instead (:func:`detectable_drop`).

**The interval** of a score is Wilson's score interval (95 %), stats/binomial.wilson.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

__all__ = ["SIGMA", "Plan", "detectable_drop", "plan", "questions_for", "significantly_worse",
           "threshold"]

SIGMA = 0.5  # the standard deviation of a 0/1 score at its worst case (p = 0.5)
_N = NormalDist()


def _z(p: float) -> float:
    return _N.inv_cdf(p)


def questions_for(theta: float, alpha: float, beta: float, sigma: float = SIGMA) -> int:
    """The questions each side needs so that a drop of ``theta`` (a fraction) is detected with
    miss rate ``beta`` by the one-sided test at ``alpha``."""
    if not 0 < theta <= 1 or not 0 < alpha < 1 or not 0 < beta < 1:
        raise ValueError(f"expected 0 < theta ≤ 1 and rates in (0, 1), found theta={theta}, "
                         f"alpha={alpha}, beta={beta}")
    return math.ceil(2 * sigma**2 * (_z(1 - alpha) + _z(1 - beta)) ** 2 / theta**2)


def detectable_drop(n: int, alpha: float, beta: float, sigma: float = SIGMA,
                    n_ref: int | None = None) -> float:
    """The smallest drop (a fraction) that ``n`` questions (``n_ref`` on the reference side,
    default ``n``) detect with miss rate ``beta`` at ``alpha``."""
    if n < 1:
        raise ValueError(f"expected at least one question, found {n}")
    ref = n if n_ref is None else n_ref
    return (_z(1 - alpha) + _z(1 - beta)) * sigma * math.sqrt(1 / n + 1 / ref)


def threshold(ref_score: float, n: int, n_ref: int, alpha: float, sigma: float = SIGMA) -> float:
    """The lowest score of ``n`` questions that passes against ``ref_score`` of ``n_ref`` (at
    least 0: below a low reference every score passes)."""
    if n < 1 or n_ref < 1:
        raise ValueError(f"expected questions on both sides, found n={n}, n_ref={n_ref}")
    return max(0.0, ref_score - _z(1 - alpha) * sigma * math.sqrt(1 / n + 1 / n_ref))


def significantly_worse(score: float, n: int, ref_score: float, n_ref: int, alpha: float,
                        sigma: float = SIGMA) -> bool:
    """True when ``score`` is below the :func:`threshold` of ``ref_score``."""
    return score < threshold(ref_score, n, n_ref, alpha, sigma)


@dataclass(frozen=True)
class Plan:
    """How many questions a layout is asked and what that can detect."""

    n: int  # the questions asked
    wanted: int  # what θ, α, β ask for (n is less when the file has fewer or questions= says)
    theta: float  # the drop asked to be detected
    detectable: float  # the drop n questions detect (≤ θ when n ≥ wanted)
    alpha: float
    beta: float
    why: str  # "derived", "all the file has", "set by questions"

    def line(self) -> str:
        """The plan in one line, as printed before the questions go."""
        shown = (f"n = {self.n} questions ({self.why}; θ = {100 * self.theta:.1f} points, "
                 f"α = {self.alpha:g}, β = {self.beta:g} ask {self.wanted})")
        if self.n < self.wanted:
            shown += (f": detects a drop of {100 * self.detectable:.1f} points at this α and β, "
                      f"not {100 * self.theta:.1f}")
        return shown


def plan(theta: float, alpha: float, beta: float, available: int,
         questions: int | None = None) -> Plan:
    """The questions to ask: ``questions`` when set, else what θ/α/β ask for, at most the
    ``available`` questions of the task file."""
    wanted = questions_for(theta, alpha, beta)
    if questions is not None:
        n, why = min(questions, available), "set by questions"
    elif wanted <= available:
        n, why = wanted, "derived"
    else:
        n, why = available, f"all the task file has ({available})"
    return Plan(n, wanted, theta, detectable_drop(n, alpha, beta), alpha, beta, why)
