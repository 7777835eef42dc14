"""The decision test: an interval on each comparison that narrows as repeats grow, an
equivalence test, and Holm's step-down over a question's comparisons. Every decision inside one
run goes through it (results/decide.py, results/questions.py); the gate between two runs keeps a
calibrated rule of its own (stats/gatenoise.py says why).

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

**Sequential looks** (``[compare] sequential``). While a layout is up, a point
may get more rounds while a comparison it takes part in is undecided (run/rounds.py asks
:func:`more_rounds_to_decide`), up to ``max_repeats``. Looking at the data after every round and
stopping when it decides would inflate α (optional stopping). The correction is **alpha
spending by a union (Bonferroni) bound over the looks**: look ``m`` is the test of the later
point's first ``m`` valid rounds against every round of the point measured before it (that one
was torn down, complete, before the later one's first round, so its rounds are fixed at every
look), for ``m`` = the planned repeats … ``max_repeats`` (the looks fixed before the run:
K = max_repeats − repeats + 1; the later point's rounds beyond its stop are never examined, so
each look is one statistic, whatever the stopping did; the last look takes every round a side
has, those the plan puts beyond the cap included: boots × repeats, which the stopping rule
never adds to); look j is given the share ``w_j`` of α
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

**Extra rounds** (the spread rule's, stats/spread.py). A point whose planned rounds disagree
beyond the spread threshold gets more rounds, up to ``max_repeats``, until the rounds nearest
its median agree: its rounds stop when they look quiet, so their variance is biased low and a
test on every round's variance decides too often (A/A at σ 2-4 % a round: 7-9 % false
decisions at α 5 %). In the fixed design such a one-boot side is tested at **Stein's two-stage
level** (:func:`stein`): the mean of every round, the variance of the planned rounds alone (the
first stage, drawn before any extra round was asked for) with their degrees of freedom. Stein's
t is exact when the second stage's size depends on the first stage's variance only; the spread
rule also looks at the extra rounds' spread, not at their mean, and benchmarks/
bench_statistics.py measures the rate it keeps (the spread-rule cells), beside the two
alternatives (every round; the planned rounds alone).

**Two levels: rounds within boots**. Rounds of one boot share that boot's
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
rerun (stats/power.boots_for: boots × rounds per boot for a stated power, the rounds per boot
Kalibera and Jones's cost optimum √(c_boot σ²_within / (c_round σ²_between))). A point measured
in one boot has no between-boot estimate of its own. Its side then takes the boot-to-boot
variance from a source the rule names (:attr:`Rule.boot_var`, :attr:`Rule.boot_source`): the
σ²_between pooled over this run's points measured over two boots or more
(:func:`pooled_between`, with its degrees of freedom), or the sweep's stated prior
(``[compare] boot_noise_pct``, σ of one boot's offset, taken as exact). The side's variance is
then σ²_within / n + σ²_between (a single boot's mean carries its whole offset), with
Welch-Satterthwaite degrees of freedom from the two parts. Without a source, the interval holds
the rounds only: results/decide.py then says "decided within one boot" unless the interval's
near end clears ``[compare] one_boot_bound_pct`` (a stated bound on how far two boots' offsets
can differ; 5 % by default, several times the 1-2 % boot-to-boot spread the seeds' README
names), and the answer says that the boot-to-boot noise is not in its interval
(results/questions.py).

The parameters come from the sweep through run.json (results/rule.rule_of); Student's t is
stats/studentt.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pytest_ppsweep.stats.studentt import t_ppf, t_sf

DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT_PCT = 1.0
# A point whose own (1 − α) interval of its mean is wider than ± this (in % of the mean)
# cannot win a comparison beyond noise.
MAX_HALFWIDTH_PCT = 10.0
TIE_SHARE = 0.2
# Degrees of freedom taken as a normal's (Student's t is within 1e-5 of it there).
_MAX_DF = 1e6


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
    # The boot-to-boot variance (log scale) a side measured in one boot takes, its degrees of
    # freedom (inf: a stated prior) and where it came from (module docstring: two levels);
    # NaN: no source, the interval holds the rounds only.
    boot_var: float = math.nan
    boot_df: float = math.inf
    boot_source: str = ""
    # ``[compare] one_boot_bound_pct``: without a boot-to-boot source, a decision whose
    # interval's near end is at least this far from 0 is plain decided (results/decide.py).
    one_boot_bound_pct: float = 5.0
    # The rounds a point was planned to get in one boot (the workload's ``repeats``): in the
    # fixed design, a one-boot side with more (the spread rule's extra rounds) takes its
    # variance from these first rounds alone (Stein's two-stage test, :func:`stein`); 0: not
    # known, every round's variance.
    planned: int = 0

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
    def boot_known(self) -> bool:
        """Whether a single-boot side's interval holds the boot-to-boot noise."""
        return not math.isnan(self.boot_var)

    @property
    def text(self) -> str:
        """How the rule is stated in an answer's reasons."""
        seq = (f"; sequential over {self.looks} looks ({self.first_look}..{self.last_look} "
               "rounds), α spent by a Bonferroni bound, half at the last look"
               if self.looks > 1 else "")
        return (f"Welch t on log values, α = {self.alpha:g} family-wise (Holm), equivalent "
                f"within ±{self.min_effect_pct:g} % (TOST){seq}")


DEFAULT_RULE = Rule()


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
    a, b = _clean(mine), _clean(theirs)
    p, p_equiv = math.inf, math.inf
    seen: set[tuple[int, int]] = set()
    for j, m in enumerate(range(rule.first_look, rule.last_look + 1)):
        # Look m: the later point's first m rounds against all of the earlier point's (it
        # was complete, torn down, before the later one's first round). The last look takes
        # every round a side has: rounds beyond the cap come from the plan (boots × repeats)
        # or the spread rule, never from the stopping rule (which stops at the cap), so that
        # look is still one statistic fixed before the run, and no measured round is dropped.
        final = j == looks - 1
        sizes = (len(a) if later is False or final else min(len(a), m),
                 len(b) if later is True or final else min(len(b), m))
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
    la, lb = stein(levels(mine), mine, rule), stein(levels(theirs), theirs, rule)
    if la is None or lb is None:
        return None
    # Each side at its own level: the rounds of one boot (plus the rule's boot-to-boot
    # variance when it has a source), or its boots as the unit
    diff = la.mean - lb.mean
    parts = [*_side(la, rule), *_side(lb, rule)]
    se = math.sqrt(sum(v for v, _ in parts))
    margin = math.log1p(rule.min_effect_pct / 100.0)
    if se <= 1e-12 * max(1.0, abs(diff)):  # no variance on either side: the data is exact
        p = 0.0 if diff else 1.0
        inside = abs(diff) < margin
        return Interval(_pct(diff), _pct(diff), _pct(diff), p, 0.0 if inside else 1.0, math.inf)
    # Welch-Satterthwaite; a stated prior (inf) adds nothing to the denominator
    denominator = sum(v * v / d for v, d in parts if v and not math.isinf(d))
    df = min(se ** 4 / denominator, _MAX_DF) if denominator else _MAX_DF
    t = diff / se
    p = min(1.0, 2.0 * t_sf(abs(t), df))
    half = t_ppf(1.0 - rule.alpha / 2.0, df) * se if bounds else math.nan
    p_equiv = max(t_sf((diff + margin) / se, df), 1.0 - t_sf((diff - margin) / se, df))
    return Interval(_pct(diff), _pct(diff - half), _pct(diff + half), p, p_equiv, df)


def _side(lv: Levels, rule: Rule) -> list[tuple[float, float]]:
    """A side's variance parts with their degrees of freedom: its mean's (at its level), and
    for a side measured in one boot the rule's boot-to-boot variance when it has a source."""
    parts = [(lv.var_mean, lv.df)]
    if not lv.two_level and rule.boot_known:
        parts.append((rule.boot_var, rule.boot_df))
    return parts


def pooled_between(found: Iterable[Levels]) -> tuple[float, float] | None:
    """The between-boot variance pooled over points measured over two boots or more (each
    weighted by its boots − 1 degrees of freedom) and those degrees of freedom; None when no
    point was."""
    two = [lv for lv in found if lv.two_level and not math.isnan(lv.between)]
    df = sum(lv.boots - 1.0 for lv in two)
    if not two or df <= 0:
        return None
    return sum((lv.boots - 1.0) * lv.between for lv in two) / df, df


def offset_var(sigma_pct_: float) -> float:
    """A stated boot offset σ in % as a log-scale variance."""
    return math.log1p(sigma_pct_ / 100.0) ** 2


def half_width_pct(values: Sequence[float], rule: Rule = DEFAULT_RULE) -> float:
    """A point's own (1 − α) interval of its geometric mean, as ± % (inf with fewer than two
    values), at its level (boots as the unit when its rounds come from two boots or more)."""
    found = stein(levels(values), values, rule)
    if found is None:
        return math.inf
    return _pct(t_ppf(1.0 - rule.alpha / 2.0, found.df) * math.sqrt(found.var_mean))


def stein(found: Levels | None, values: Sequence[float], rule: Rule) -> Levels | None:
    """A one-boot side with more rounds than planned, at Stein's two-stage level: the mean of
    every round, its variance from the planned (first) rounds alone, with their degrees of
    freedom (module docstring: extra rounds). ``found`` unchanged otherwise: no plan known,
    sequential looks (their own correction), two boots or more, no extra round."""
    if (found is None or rule.looks > 1 or rule.planned < 2 or found.two_level
            or found.rounds <= rule.planned):
        return found
    first = [math.log(v) for v in _clean(values)[:rule.planned]]
    var = statistics.variance(first)
    return replace(found, var_mean=var / found.rounds, df=rule.planned - 1.0, within=var)


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
