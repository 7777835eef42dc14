"""The decision rule's statistics, once: an interval on each comparison that narrows as repeats
grow, an equivalence test, and Holm's step-down over a question's comparisons.

**Interval.** Each comparison is two points' valid repeats of one metric at one C. Throughputs
and latencies are ratios at heart (a layout is "8 % faster"), and their round-to-round noise
is multiplicative, so the rule works on the logarithm of each repeat: the comparison's estimate
is the difference of the two points' mean log values, i.e. the log of the ratio of their
geometric means, with a **Welch t-interval** (unequal variances, Welch-Satterthwaite degrees of
freedom). Its half-width is t × √(s₁²/n₁ + s₂²/n₂): it shrinks as 1/√n, where the earlier
spread threshold (5 × the median deviation of the repeats) did not shrink at all. Why Welch's t
and not a bootstrap or a rank test: with 2-8 repeats a percentile bootstrap under-covers badly
(it cannot see beyond the few values it resamples), and a Mann-Whitney test cannot reach
p < 0.05 at all with three repeats a side (its smallest two-sided p is 0.1) and gives no
interval of the effect. The t-interval on logs is exact for log-normal noise and close to it
for the symmetric round noise measured here (bench_statistics.py checks the error rates it
states on synthetic truths).

**Equivalence (TOST).** Two one-sided tests at level α against the margin ±``min_effect_pct``
(on the log scale, ±log(1 + m)): the difference is ``equivalent`` when the (1 − 2α) interval
lies inside the margin. An equivalence over several Cs needs each C equivalent (an
intersection-union test, valid at α without correction).

**Family.** The p-values of every rival × every C of one question go through Holm's step-down
at α (:func:`holm`): the chance of any false "better"/"worse" in the question is at most α, so
adding concurrencies does not inflate false decisions (the earlier rule: 2.1 % false decisions
at 1 C, 11.6 % at 6).

**Two metrics, one α.** With a tie-break metric the question has two families: the primary
metric's comparisons and the tie-break's (reached only between points shown equivalent on the
primary). α is split between them (weighted Bonferroni, :data:`TIE_SHARE` to the tie-break):
the primary family at 0.8 α, the tie-break's at 0.2 α, so a false decision through either is
at most α in all. Without a tie-break the primary family has the whole α.

**A point's own interval.** A point with fewer than two valid repeats has no variance: nothing is
compared with it (either side, not both). A point whose own (1 − α) interval of its mean is
wider than ± :data:`MAX_HALFWIDTH_PCT` cannot win beyond noise (three rounds of 1300, 1000,
1400 are ±55 %: whatever they beat, they do not show it).

**Sequential looks** (``[compare] sequential``, issue 37 point 3). While a layout is up, a point
may get more rounds while a comparison it takes part in is undecided (run/rounds.py asks
:func:`more_rounds_to_decide`), up to ``max_repeats``. Looking at the data after every round and
stopping when it decides would inflate α (optional stopping). The correction is **alpha
spending by a union (Bonferroni) bound over the looks**: look ``m`` is the test of the later
point's first ``m`` valid rounds against every round of the point measured before it (that one
was torn down, complete, before the later one's first round, so its rounds are fixed at every
look), for ``m`` = the planned repeats … ``max_repeats`` (the looks fixed before the run:
K = max_repeats − repeats + 1; the later point's rounds beyond its stop are never examined, so
each look is one statistic, whatever the stopping did); look j is given the share ``w_j`` of α
(:func:`look_weights`: half of α at the last look, the cap, the other half evenly over the
interim looks), and a comparison's sequential p-value is ``min_j p_j / w_j`` (:func:`interval`).
It is a valid p-value for *any* stopping rule (P(min_j p_j / w_j ≤ u) ≤ Σ_j w_j u = u under
"no difference"), so Holm over the question's comparisons still holds family-wise at α, and so
does TOST (its p-values are corrected the same way). Why not Pocock or O'Brien-Fleming
boundaries: they are exact for a z statistic with known variance and independent increments;
here every look re-estimates the variance of two points (Welch), the rivals were torn down at
their own round counts, and one point's looks serve several rivals and Cs inside a Holm family.
The union bound needs none of that and states its error rate exactly (≤ α, conservative: the
looks are positively correlated). Giving half of α to the cap keeps the power at the cap close to
the fixed design's (O'Brien-Fleming's spirit: spend little early), while a large gap still stops
after the planned rounds. The stopping rule itself (:func:`more_rounds_to_decide`) only saves
rounds; the error rate does not depend on it. Without ``sequential`` there is one look, at all
rounds, with all of α (the fixed design; spread-rule extra rounds do not look at the means).

**Two levels: rounds within boots** (issue 37 point 4). Rounds of one boot share that boot's
state (placement, warmed caches, clocks), so their spread understates the spread between boots
of the same configuration (Kalibera and Jones, "Rigorous benchmarking in reasonable time": a
nested random-effects model, rounds within boots, boots within the point). Each round carries
the boot it came from (results.csv ``boot``; a :class:`Sample`). When a point's rounds come from
two boots or more, its side of every comparison takes **the boot as the unit**: the mean of the
boots' mean log values, its variance the variance of those boot means over the number of boots,
with boots − 1 degrees of freedom (the same Welch interval, a side's variance and degrees of
freedom from its own level). That is the honest standard error of a point whose boots differ:
it holds whatever the between-boot share, and it widens the interval (with two boots one degree
of freedom: t = 12.7 at 95 %), where pooling the rounds as one level would not. The variance
components themselves (:func:`levels`: one-way random-effects ANOVA on the log values,
σ²_between = (MS_between − MS_within) / n₀, never below 0) are stated in the answer and plan the
rerun (:func:`boots_for`: boots × rounds per boot for a stated power, the rounds per boot
Kalibera and Jones's cost optimum √(c_boot σ²_within / (c_round σ²_between))). A point measured
in one boot has no between-boot estimate: its side stays the rounds' level, and its answer says
that the boot-to-boot noise is not in its interval (results/questions.py).

No dependency: the Student t distribution is computed here (regularised incomplete beta by
continued fraction; quantiles by bisection), checked against scipy's values in
tests/results/test_stats.py.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pytest_ppsweep.folder.runfolder import CompareKey, RunJsonDict, RunKey
from pytest_ppsweep.results.spread import DEFAULT_MAX_REPEATS

DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT_PCT = 1.0
# A point whose own (1 − α) interval of its mean is wider than ± this (in % of the mean)
# cannot win a comparison beyond noise.
MAX_HALFWIDTH_PCT = 10.0
TIE_SHARE = 0.2


@dataclass(frozen=True)
class Rule:
    """The decision rule's parameters (``[compare] alpha``, ``[compare] min_effect_pct``)."""

    alpha: float = DEFAULT_ALPHA
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT
    max_halfwidth_pct: float = MAX_HALFWIDTH_PCT
    # With a tie-break metric, α is split (weighted Bonferroni) between the primary metric's
    # Holm family, α × (1 − tie_share), and the tie-break's, α × tie_share: a decision through
    # either stays within α in all.
    tie_share: float = TIE_SHARE
    # Sequential looks (``[compare] sequential``): the planned repeats (the first look) and
    # ``max_repeats`` (the last); 0, 0: one look at all rounds (the fixed design).
    first_look: int = 0
    last_look: int = 0
    # The points in the order they were measured (their first round): a sequential look is
    # over the later point's rounds against all of the earlier one's (:func:`interval`).
    order: tuple[str, ...] = ()

    def later(self, point: str, versus: str) -> bool | None:
        """Whether ``point`` was measured after ``versus`` (None: not known)."""
        if point not in self.order or versus not in self.order:
            return None
        return self.order.index(point) > self.order.index(versus)

    @property
    def looks(self) -> int:
        """How many looks α is spent over (1: the fixed design)."""
        if self.first_look <= 0 or self.last_look <= self.first_look:
            return 1
        return self.last_look - self.first_look + 1

    @property
    def text(self) -> str:
        """How the rule is stated in an answer's reasons."""
        seq = (f"; sequential over {self.looks} looks ({self.first_look}..{self.last_look} "
               "rounds), α spent by a Bonferroni bound, half at the last look"
               if self.looks > 1 else "")
        return (f"Welch t on log values, α = {self.alpha:g} family-wise (Holm), equivalent "
                f"within ±{self.min_effect_pct:g} % (TOST){seq}")


DEFAULT_RULE = Rule()


def rule_of(raw: RunJsonDict, workload: str = "") -> Rule:
    """The decision rule of a run (run.json ``compare``: ``alpha``, ``min_effect_pct``, and
    with ``sequential`` the looks from the workload's planned ``repeats`` to ``max_repeats``;
    the defaults for a run folder written before them)."""
    given = raw.get(RunKey.COMPARE)
    if not isinstance(given, dict):
        return DEFAULT_RULE
    try:
        rule = Rule(alpha=float(given.get(CompareKey.ALPHA, DEFAULT_RULE.alpha)),
                    min_effect_pct=float(given.get(CompareKey.MIN_EFFECT_PCT,
                                                   DEFAULT_RULE.min_effect_pct)))
        if given.get(CompareKey.SEQUENTIAL) is True:
            named = raw.get(RunKey.WORKLOADS)
            spec = (named.get(workload) if isinstance(named, dict) and workload else None) or (
                raw.get(RunKey.WORKLOAD) or {})
            first = int(spec.get("repeats") or 0)
            last = int(raw.get(RunKey.MAX_REPEATS) or DEFAULT_MAX_REPEATS)  # run/rounds.py's cap
            rule = replace(rule, first_look=first, last_look=max(first, last))
        return rule
    except (TypeError, ValueError, AttributeError):
        return DEFAULT_RULE


# --- the Student t distribution -------------------------------------------------------------

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


# --- one comparison ---------------------------------------------------------------------------

class Sample(list[float]):
    """A point's valid rounds at one C in round order, each with the boot it came from (the
    results.csv ``boot`` of its row): a list of the values, so that every reader of plain
    values reads it unchanged, and ``boots`` beside them (empty: not known)."""

    def __init__(self, values: Iterable[float] = (), boots: Iterable[str] = ()) -> None:
        super().__init__(values)
        self.boots: tuple[str, ...] = tuple(boots)
        if self.boots and len(self.boots) != len(self):
            raise ValueError(f"{len(self)} values but {len(self.boots)} boots")


def boots_of(values: Sequence[float]) -> tuple[str, ...]:
    """The boot of each of ``values`` (a :class:`Sample`'s), or () when not known."""
    boots = getattr(values, "boots", ())
    return tuple(boots) if len(boots) == len(values) else ()


def _clean(values: Sequence[float]) -> Sample:
    """The positive finite values (their boots kept beside them)."""
    boots = boots_of(values)
    keep = [i for i, v in enumerate(values) if v > 0 and math.isfinite(v)]
    return Sample([values[i] for i in keep], [boots[i] for i in keep] if boots else ())


def without_nan(values: Sequence[float]) -> Sample:
    """``values`` less the NaN ones, their boots kept beside them."""
    boots = boots_of(values)
    keep = [i for i, v in enumerate(values) if not math.isnan(v)]
    return Sample([values[i] for i in keep], [boots[i] for i in keep] if boots else ())


def _head(values: Sample, m: int) -> Sample:
    """The first ``m`` values of a clean sample, with their boots."""
    return Sample(values[:m], values.boots[:m])


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(v) for v in values if v > 0 and math.isfinite(v)]


@dataclass(frozen=True)
class Levels:
    """A point's mean log value and its uncertainty at the level its rounds allow.

    ``mean``: the mean of the log values (of the boots' mean log values with two boots or
    more); ``var_mean``: the variance of that mean; ``df``: its degrees of freedom; ``rounds``,
    ``boots``: how many of each (boots 1: one boot, or not known); ``within``: σ² of a round
    within a boot (log scale; NaN with one round per boot); ``between``: σ² between boots, the
    one-way random-effects ANOVA estimate (NaN with one boot)."""

    mean: float
    var_mean: float
    df: float
    rounds: int
    boots: int
    within: float
    between: float

    @property
    def two_level(self) -> bool:
        """Whether the boot is the unit (two boots or more)."""
        return self.boots >= 2


def levels(values: Sequence[float]) -> Levels | None:
    """The level of ``values`` (module docstring: two levels), None with fewer than two
    positive finite values."""
    clean = _clean(values)
    logs = [math.log(v) for v in clean]
    if len(logs) < 2:
        return None
    groups: dict[str, list[float]] = {}
    for i, x in enumerate(logs):
        groups.setdefault(clean.boots[i] if clean.boots else "", []).append(x)
    if len(groups) < 2:
        var = statistics.variance(logs)
        return Levels(statistics.fmean(logs), var / len(logs), len(logs) - 1.0, len(logs), 1,
                      var, math.nan)
    means = [statistics.fmean(g) for g in groups.values()]
    k, total = len(groups), len(logs)
    ss_within = sum((x - m) ** 2 for g, m in zip(groups.values(), means, strict=True)
                    for x in g)
    df_within = total - k
    ms_within = ss_within / df_within if df_within > 0 else math.nan
    grand = sum(len(g) * m for g, m in zip(groups.values(), means, strict=True)) / total
    ms_between = sum(len(g) * (m - grand) ** 2
                     for g, m in zip(groups.values(), means, strict=True)) / (k - 1)
    n0 = (total - sum(len(g) ** 2 for g in groups.values()) / total) / (k - 1)
    between = (max(0.0, (ms_between - ms_within) / n0) if not math.isnan(ms_within)
               else math.nan)
    return Levels(statistics.fmean(means), statistics.variance(means) / k, k - 1.0, total, k,
                  ms_within, between)


def sigma_pct(var: float) -> float:
    """A log-scale variance as the ± % of one standard deviation (NaN stays NaN)."""
    return math.nan if math.isnan(var) else _pct(math.sqrt(max(0.0, var)))


def _pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


@dataclass(frozen=True)
class Interval:
    """One comparison of ``mine`` against ``theirs``: ``delta_pct`` the ratio of their
    geometric means − 1 in %; ``low_pct``/``high_pct`` its (1 − α) Welch interval;
    ``p_value`` two-sided (no difference); ``p_equiv`` the TOST p-value (difference inside
    ±min_effect); ``df`` the Welch degrees of freedom."""

    delta_pct: float
    low_pct: float
    high_pct: float
    p_value: float
    p_equiv: float
    df: float

    @property
    def half_width_pct(self) -> float:
        """Half the interval's width, in % (the ± an answer prints)."""
        return (self.high_pct - self.low_pct) / 2.0


def look_weights(looks: int) -> list[float]:
    """Each look's share of α (they sum to 1): all of it with one look; else half at the last
    look and the other half evenly over the interim ones (module docstring)."""
    if looks <= 1:
        return [1.0]
    return [0.5 / (looks - 1)] * (looks - 1) + [0.5]


def interval(mine: Sequence[float], theirs: Sequence[float], rule: Rule = DEFAULT_RULE,
             later: bool | None = None) -> Interval | None:
    """The Welch interval of log(mine) − log(theirs), or None when either side has fewer than
    two positive finite values (no variance to estimate). ``mine`` and ``theirs`` are in round
    order. With sequential looks (``rule.looks`` > 1) the p-values are the looks' corrected
    ones (``min_j p_j / w_j``, module docstring) and the interval is the last look's, at its
    share of α. ``later``: whether ``mine`` was measured after ``theirs`` (True), before
    (False), or not known (None: both sides' prefixes at each look)."""
    looks = rule.looks
    if looks == 1:
        return _fixed(mine, theirs, rule)
    weights = look_weights(looks)
    a, b = _head(_clean(mine), rule.last_look), _head(_clean(theirs), rule.last_look)
    p, p_equiv = math.inf, math.inf
    seen: set[tuple[int, int]] = set()
    for j, m in enumerate(range(rule.first_look, rule.last_look + 1)):
        # Look m: the later point's first m rounds against all of the earlier point's (it
        # was complete, torn down, before the later one's first round).
        sizes = (len(a) if later is False else min(len(a), m),
                 len(b) if later is True else min(len(b), m))
        if sizes in seen:  # the same data as an earlier look: nothing new to test
            continue
        seen.add(sizes)
        at = _fixed(_head(a, sizes[0]), _head(b, sizes[1]), rule, bounds=False)
        if at is None:
            continue
        p = min(p, at.p_value / weights[j])
        p_equiv = min(p_equiv, at.p_equiv / weights[j])
    last = _fixed(a, b, replace(rule, alpha=rule.alpha * weights[-1]))
    if last is None:
        return None
    return replace(last, p_value=min(1.0, p), p_equiv=min(1.0, p_equiv))


def _fixed(mine: Sequence[float], theirs: Sequence[float], rule: Rule,
           bounds: bool = True) -> Interval | None:
    """:func:`interval` of one look (all the values given); ``bounds=False``: the p-values
    only (an interim look; the interval's ends are then NaN)."""
    la, lb = levels(mine), levels(theirs)
    if la is None or lb is None:
        return None
    # Each side at its own level: the rounds of one boot, or its boots as the unit
    diff = la.mean - lb.mean
    va, vb = la.var_mean, lb.var_mean
    se = math.sqrt(va + vb)
    margin = math.log1p(rule.min_effect_pct / 100.0)
    if se <= 1e-12 * max(1.0, abs(diff)):  # no variance on either side: the data is exact
        p = 0.0 if diff else 1.0
        inside = abs(diff) < margin
        return Interval(_pct(diff), _pct(diff), _pct(diff), p, 0.0 if inside else 1.0, math.inf)
    df = (va + vb) ** 2 / ((va * va / la.df if va else 0.0) + (vb * vb / lb.df if vb else 0.0))
    t = diff / se
    p = min(1.0, 2.0 * t_sf(abs(t), df))
    half = t_ppf(1.0 - rule.alpha / 2.0, df) * se if bounds else math.nan
    p_equiv = max(t_sf((diff + margin) / se, df), 1.0 - t_sf((diff - margin) / se, df))
    return Interval(_pct(diff), _pct(diff - half), _pct(diff + half), p, p_equiv, df)


def half_width_pct(values: Sequence[float], rule: Rule = DEFAULT_RULE) -> float:
    """A point's own (1 − α) interval of its geometric mean, as ± % (inf with fewer than two
    values), at its level (boots as the unit when its rounds come from two boots or more)."""
    found = levels(values)
    if found is None:
        return math.inf
    return _pct(t_ppf(1.0 - rule.alpha / 2.0, found.df) * math.sqrt(found.var_mean))


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected with family-wise error ≤ ``alpha``
    (NaN p-values: not tested, never rejected, not counted in the family)."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    out = [False] * len(p_values)
    m = len(tested)
    for k, (p, i) in enumerate(tested):
        if p > alpha / (m - k):
            break
        out[i] = True
    return out


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


def more_rounds_to_decide(mine: Sequence[float], rivals: Mapping[str, Sequence[float]],
                          higher_is_better: bool, rule: Rule, family: int,
                          tie_break: bool = False, later: int = 0) -> str | None:
    """Why a booted point should run one more round (sequential looks, ``rule.looks`` > 1),
    or None. ``mine``: its valid rounds at one C, in round order; ``rivals``: each point
    measured before at that C, its valid rounds; ``later``: points still to be measured that
    will be compared with it.

    One more round when a comparison with a rival is neither decided nor equivalent and the
    rounds left up to ``rule.last_look`` could decide it at the observed gap and noise; or when
    the point leads (no rival's estimate is better) and ``later`` points will be compared with
    it: a layout torn down is not rebooted by itself, so the leader's rounds are taken while it
    is up (they narrow every later comparison, which the later point's own rounds cannot do
    beyond the leader's share of the error). None: not sequential, the planned rounds not done
    yet, the cap reached, the point already shown worse than a rival (it cannot be the answer),
    or every comparison decided, equivalent or out of reach with nothing left to measure.

    Only a stopping rule: it may use a simpler level (Holm's first step, α / ``family``) than
    the answer, whose error rate holds for any stopping rule (module docstring)."""
    if rule.looks == 1:
        return None
    a = _logs(mine)
    n = len(a)
    if n < rule.first_look or n >= rule.last_look or n < 2:
        return None
    level = rule.alpha * ((1.0 - rule.tie_share) if tie_break else 1.0) / max(1, family)
    last_w = look_weights(rule.looks)[-1]
    margin = math.log1p(rule.min_effect_pct / 100.0)
    open_: list[str] = []
    leads = True
    for name, values in rivals.items():
        b = _logs(values)
        found = interval(mine, values, rule, later=True)
        if found is None or len(b) < 2:
            continue
        gain = found.delta_pct if higher_is_better else -found.delta_pct
        leads = leads and gain >= 0
        if found.p_value <= level and gain < 0:
            return None  # shown worse than a rival: more rounds cannot make it the answer
        if found.p_value <= level or found.p_equiv <= rule.alpha:
            continue
        diff = statistics.fmean(a) - statistics.fmean(b)
        va, vb = statistics.variance(a), statistics.variance(b) / len(b)
        se_cap = math.sqrt(va / rule.last_look + vb)
        if se_cap <= 0:
            continue
        ma, mb = va / rule.last_look, vb  # the Welch degrees of freedom at the cap
        df = max(1.0, (ma + mb) ** 2 / (ma * ma / (rule.last_look - 1)
                                        + (mb * mb / (len(b) - 1) if mb else 0.0)))
        # Reachable: the gap one standard error beyond the estimate (or nearer to 0, for
        # equivalence) would be decided at the cap's look: a rule that gives up only on gaps
        # the rounds left are unlikely to show.
        se_now = math.sqrt(va / n + vb)
        separable = (abs(diff) + se_now) / se_cap >= t_ppf(1.0 - last_w * level / 2.0, df)
        provable = (max(0.0, abs(diff) - se_now) + t_ppf(1.0 - last_w * rule.alpha, df)
                    * se_cap < margin)
        if separable or provable:
            open_.append(f"{name} ({found.delta_pct:+.2f} %, p {found.p_value:.2g} > "
                         f"{level:.2g})")
    if not open_ and leads and later > 0:
        return (f"leads after {n} round(s), and {later} point(s) still to measure will be "
                f"compared with it; sequential looks up to {rule.last_look}")
    if not open_:
        return None
    return (f"undecided against {', '.join(open_)} after {n} round(s); sequential looks up to "
            f"{rule.last_look}")
