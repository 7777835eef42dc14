"""One decision among candidate points, with its evidence and a stated error rate: every
comparison is a Welch interval on the log ratio of the two points' valid repeats at one C, and
the comparisons of one question are one family under Holm's step-down (stats/decision.py).

The order of play, written out in each answer's reasons:

1. candidates are ranked by their objective's primary metric (mean over the Cs of each median
   relative to the best one at that C, so each C weighs the same);
2. the leader is compared with every rival at every C on the primary metric, all of them one
   Holm family at α (``[compare] alpha``; 0.8 α when a tie-break follows, which gets 0.2 α):
   ``better``/``worse`` when Holm rejects "no difference" (and the winner's own interval is
   not wider than ± MAX_HALFWIDTH_PCT),
   ``equivalent`` when the TOST shows the difference inside ±``[compare] min_effect_pct``
   (at α; at the tie-break's 0.2 α when a tie-break follows: an equivalence hands the pick to
   the tie-break, so a false one, a true gap of the margin or more, would pick the slower point
   without a test of the primary metric; at 0.2 α the question's false decisions, through
   either metric or a false equivalence, stay within α: 0.8 α + 0.2 α),
   else ``within noise`` (neither);
3. ``decided`` when the leader beats every rival (better at some C, worse at none), or when the
   rivals *equivalent* to it on the primary metric (at every C) are separated by the tie-break
   metric the same way (its own Holm family); ``equivalent`` when the points equivalent on the
   primary metric stay unseparated (no tie-break, or the tie-break does not separate them);
   otherwise ``inconclusive`` between the leader and the rivals it could not separate from.

The tie-break only separates points shown *equal* on the primary metric: "not different" is
not "equal" (a 0.5 % primary gap at three noisy repeats is neither shown nor excluded), so such
a tie is left ``inconclusive`` with the rerun that measures it again, instead of letting a
secondary metric (often one that trades against the primary, like TPOT against output TPS)
pick the winner.

A decision between points measured in one boot each, when the rule knows no boot-to-boot
variance (stats/decision.py: two levels), holds within those boots only: a boot offset could
reverse it. It is ``decided within one boot`` unless, against every rival, some C's interval
has its near end at least ``one_boot_bound_pct`` from 0 (then no offset within that bound can
reverse it, and it is plain ``decided``, saying so).

A point with fewer than two valid repeats (either side) gives no variance estimate: the
comparison is ``not compared`` and cannot decide. One valid point alone is ``measured``: a
decision needs at least two measured points.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pytest_ppsweep.results.answers import (
    BETTER,
    DECIDED,
    DECIDED_ONE_BOOT,
    EQUIVALENT,
    INCONCLUSIVE,
    MEASURED,
    NO_VALID_POINT,
    NOT_COMPARED,
    ONE_BOOT_NOTE,
    WITHIN_NOISE,
    WORSE,
    Evidence,
)
from pytest_ppsweep.results.objective import higher_is_better, label
from pytest_ppsweep.stats.decision import (
    DEFAULT_RULE,
    Rule,
    half_width_pct,
    holm,
    interval,
    levels,
    without_nan,
)

# Repeats per metric per C of each candidate: {point: {C: [values of its valid rounds]}}.
Repeats = Mapping[str, Mapping[int, Sequence[float]]]


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` found; the question's finder turns it into an Answer."""

    status: str
    winner: str | None
    ranking: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    reasons: tuple[str, ...]
    # inconclusive: the top points the data cannot separate; equivalent: the points shown equal
    unseparated: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Pending:
    """One comparison measured, its verdict not yet given (Holm needs the whole family)."""

    evidence: Evidence
    mine_ok: str  # "" when ``point`` may win beyond noise, else why not
    theirs_ok: str
    p_equiv: float  # the TOST p-value (NaN: not compared)


def _measure(point: str, versus: str, conc: int, metric: str, mine: Sequence[float],
             theirs: Sequence[float], rule: Rule) -> _Pending:
    mine, theirs = without_nan(mine), without_nan(theirs)  # each value's boot kept
    reps = (len(mine), len(theirs))
    if not mine or not theirs:
        return _Pending(Evidence(point, versus, conc, metric, math.nan, math.nan, NOT_COMPARED,
                                 reps, "no valid repeat"), "", "", math.nan)
    found = interval(mine, theirs, rule, rule.later(point, versus))
    if found is None:
        a, b = statistics.median(mine), statistics.median(theirs)
        delta = (a / b - 1.0) * 100.0 if b else math.nan
        return _Pending(Evidence(point, versus, conc, metric, delta, math.nan, NOT_COMPARED,
                                 reps, "fewer than 2 valid repeats: no variance estimate"),
                        "", "", math.nan)

    def own(name: str, values: Sequence[float]) -> str:
        width = half_width_pct(values, rule)
        return ("" if width <= rule.max_halfwidth_pct else
                f"{name}'s own interval ±{width:.1f} % is wider than "
                f"±{rule.max_halfwidth_pct:g} %: it cannot win beyond noise")

    ev = Evidence(point, versus, conc, metric, found.delta_pct, found.half_width_pct, "", reps,
                  "", found.low_pct, found.high_pct, found.p_value)
    return _Pending(ev, own(point, mine), own(versus, theirs), found.p_equiv)


def _family(pending: Sequence[_Pending], rule: Rule, level: float | None = None,
            equiv_level: float | None = None) -> list[Evidence]:
    """The verdicts of one family of comparisons: Holm at ``level`` (α by default) over its
    p-values, equivalence by TOST at ``equiv_level`` (α by default), and a winner's own interval
    (module docstring)."""
    equiv_at = rule.alpha if equiv_level is None else equiv_level
    rejected = holm([p.evidence.p_value for p in pending],
                    rule.alpha if level is None else level)
    out = []
    for p, reject in zip(pending, rejected, strict=True):
        ev = p.evidence
        if ev.verdict == NOT_COMPARED:
            out.append(ev)
            continue
        gain = ev.delta_pct if higher_is_better(ev.metric) else -ev.delta_pct
        if p.p_equiv <= equiv_at:
            verdict, note = EQUIVALENT, ""
        elif reject and gain > 0:
            verdict, note = (BETTER, "") if not p.mine_ok else (WITHIN_NOISE, p.mine_ok)
        elif reject and gain < 0:
            verdict, note = (WORSE, "") if not p.theirs_ok else (WITHIN_NOISE, p.theirs_ok)
        else:
            verdict, note = WITHIN_NOISE, ""
        out.append(replace(ev, verdict=verdict, note=note))
    return out


def compare(point: str, versus: str, conc: int, metric: str, mine: Sequence[float],
            theirs: Sequence[float], rule: Rule = DEFAULT_RULE) -> Evidence:
    """``point`` vs ``versus`` at one C on ``metric`` from each one's valid repeats, as a
    family of its own (a decision judges its comparisons together: :func:`judge`)."""
    return _family([_measure(point, versus, conc, metric, mine, theirs, rule)], rule)[0]


def judge(pairs: Sequence[tuple[str, str, int, str, Sequence[float], Sequence[float]]],
          rule: Rule = DEFAULT_RULE, level: float | None = None,
          equiv_level: float | None = None) -> list[Evidence]:
    """Comparisons ``(point, versus, C, metric, mine, theirs)`` judged as one Holm family at
    ``level`` (the rule's α by default)."""
    return _family([_measure(*p, rule) for p in pairs], rule, level, equiv_level)


def outcome(evidence: Sequence[Evidence]) -> str:
    """Over the Cs: ``better`` (better at some C, worse at none), ``worse``, ``equivalent`` (at
    every C), ``within noise`` (neither separated nor equivalent somewhere), ``not compared``
    (some C could not be compared and none decided) or ``mixed`` (better at one C, worse at
    another: a trade-off, not noise)."""
    verdicts = {e.verdict for e in evidence}
    if BETTER in verdicts and WORSE in verdicts:
        return "mixed"
    if BETTER in verdicts:
        return BETTER
    if WORSE in verdicts:
        return WORSE
    if NOT_COMPARED in verdicts:
        return NOT_COMPARED
    return EQUIVALENT if verdicts == {EQUIVALENT} else WITHIN_NOISE


def _score(values: Mapping[str, Mapping[int, Sequence[float]]], point: str, metric: str,
           concs: Sequence[int]) -> float:
    up = higher_is_better(metric)
    parts = []
    for c in concs:
        meds = {p: statistics.median(v[c]) for p, v in values.items() if v.get(c)}
        if point not in meds or not meds[point]:
            continue
        best = max(meds.values()) if up else min(meds.values())
        parts.append(meds[point] / best if up else best / meds[point])
    return sum(parts) / len(parts) if parts else -math.inf


def best_of(points: Sequence[str], metric: str, repeats: Mapping[str, Repeats],
            concs: Sequence[int]) -> str | None:
    """The point of ``points`` that :func:`decide` would rank first on ``metric`` alone (the
    mean over ``concs`` of its median against the best median), or None when none was
    measured. A choice, not a decision: the question that follows judges it."""
    values = repeats.get(metric, {})
    scored = {p: _score({q: values.get(q, {}) for q in points}, p, metric, concs) for p in points}
    measured = [p for p in points if scored[p] > -math.inf]
    return max(measured, key=lambda p: scored[p]) if measured else None


def _pairs(pairs: Sequence[tuple[str, str]], metric: str, values: Repeats,
           concs: Sequence[int], rule: Rule, level: float,
           equiv_level: float | None = None) -> dict[str, list[Evidence]]:
    """Every pair × C on ``metric`` as one Holm family at ``level`` (equivalence at
    ``equiv_level``); per ``versus`` its evidence."""
    judged = judge([(a, b, c, metric, values.get(a, {}).get(c, ()), values.get(b, {}).get(c, ()))
                    for a, b in pairs for c in concs], rule, level, equiv_level)
    out: dict[str, list[Evidence]] = {}
    for e in judged:
        out.setdefault(e.versus, []).append(e)
    return out


def _say(ev: Sequence[Evidence]) -> str:
    return "; ".join(
        f"C={e.concurrency} {e.delta_pct:+.2f} % [{e.low_pct:+.2f}, {e.high_pct:+.2f}] "
        f"p={e.p_value:.2g}: {e.verdict}" + (f" ({e.note})" if e.note else "")
        if not math.isnan(e.noise_pct) else f"C={e.concurrency}: {e.verdict} ({e.note})"
        for e in ev)


def decide(candidates: Sequence[str], objective: Sequence[str],
           repeats: Mapping[str, Repeats], concs: Sequence[int],
           rule: Rule = DEFAULT_RULE) -> Decision:
    """Rank ``candidates`` (sweep order) by ``objective`` (primary metric, then tie-break) from
    ``repeats[metric][point][C]`` and decide (module docstring) by ``rule``."""
    if not candidates:
        return Decision(NO_VALID_POINT, None, (), (), ("no valid point to rank",))
    primary = objective[0]
    tie = objective[1] if len(objective) > 1 else None
    values = repeats.get(primary, {})
    order = {p: i for i, p in enumerate(candidates)}
    ranking = sorted(candidates, key=lambda p: (-_score({q: values.get(q, {}) for q in
                                                         candidates}, p, primary, concs),
                                                order[p]))
    if len(ranking) == 1:
        return Decision(MEASURED, ranking[0], tuple(ranking), (),
                        (f"{ranking[0]} is the only valid point: measured, nothing compared "
                         "(a decision needs at least two measured points).",))
    evidence: list[Evidence] = []
    reasons: list[str] = []
    leader = ranking[0]
    tied: list[str] = []
    open_: list[str] = []
    beaten: list[str] = []
    # α split between the primary family and the tie-break's (stats/decision.py)
    main_level = rule.alpha * (1.0 - rule.tie_share) if tie else rule.alpha
    tie_level = rule.alpha * rule.tie_share
    # An equivalence on the primary metric hands the pick to the tie-break: a false one (a
    # true gap of min_effect or more) picks without a test of the primary, so with a tie-break
    # it is shown at the tie-break's share of α, inside the question's budget (module docstring).
    first = _pairs([(leader, r) for r in ranking[1:]], primary, values, concs, rule,
                   main_level, tie_level if tie else None)
    for rival in ranking[1:]:
        ev = first[rival]
        evidence += ev
        result = outcome(ev)
        if result == BETTER:
            beaten.append(rival)
            reasons.append(f"{leader} beats {rival} on {label(primary)}: {_say(ev)}.")
        elif result == EQUIVALENT:
            tied.append(rival)
            reasons.append(f"{leader} and {rival} are equivalent within "
                           f"±{rule.min_effect_pct:g} % on {label(primary)}: {_say(ev)}.")
        else:
            open_.append(rival)
            reasons.append(f"{leader} vs {rival} on {label(primary)}: {result} ({_say(ev)}).")
    winner = leader
    equal: list[str] = []
    if tied and tie is None:
        equal = list(tied)
    elif tied and tie is not None:
        group = [leader, *tied]
        tvals = repeats.get(tie, {})
        winner = sorted(group, key=lambda p: (-_score({q: tvals.get(q, {}) for q in group},
                                                      p, tie, concs), order[p]))[0]
        reasons.append(f"{label(primary)} equivalent between {', '.join(group)}; "
                       f"the tie-break is {label(tie)}.")
        second = _pairs([(winner, r) for r in group if r != winner], tie, tvals, concs, rule,
                        tie_level)
        for rival in group:
            if rival == winner:
                continue
            ev = second[rival]
            evidence += ev
            if outcome(ev) == BETTER:
                reasons.append(f"{winner} beats {rival} on {label(tie)}: {_say(ev)}.")
            else:
                equal.append(rival)
                reasons.append(f"{winner} vs {rival} on {label(tie)}: {outcome(ev)} "
                               f"({_say(ev)}).")
        if winner != leader and beaten:
            # The tie-break winner must also beat, on the primary metric, every rival the
            # leader beat (it is only equivalent to the leader).
            third = _pairs([(winner, r) for r in beaten], primary, values, concs, rule,
                           main_level)
            for rival in beaten:
                evidence += third[rival]
                if outcome(third[rival]) != BETTER:
                    open_.append(rival)
                    reasons.append(f"{winner} vs {rival} on {label(primary)}: "
                                   f"{outcome(third[rival])} ({_say(third[rival])}).")
        ranking = [winner, *[p for p in ranking if p != winner]]
    if open_:
        unseparated = tuple(dict.fromkeys([winner, *equal, *open_]))
        return Decision(INCONCLUSIVE, None, tuple(ranking), tuple(evidence),
                        (f"The data cannot separate {', '.join(unseparated)}.", *reasons),
                        unseparated)
    if equal:
        same = tuple(dict.fromkeys([winner, *equal]))
        why = (f"and the tie-break ({label(tie)}) does not separate them" if tie else
               "and the objective has no tie-break")
        return Decision(EQUIVALENT, None, tuple(ranking), tuple(evidence),
                        (f"{' and '.join(same)} are equivalent within ±{rule.min_effect_pct:g} % "
                         f"on {label(primary)}, {why}.", *reasons), same)
    head = (f"{winner} beats every rival beyond noise on {label(primary)}."
            if not tied else f"{winner} is decided by the tie-break ({label(tie or primary)}).")
    status, level_why = _level(winner, evidence, repeats, rule)
    return Decision(status, winner, tuple(ranking), tuple(evidence),
                    (head, *([level_why] if level_why else []), *reasons))


def _level(winner: str, evidence: Sequence[Evidence], repeats: Mapping[str, Repeats],
           rule: Rule) -> tuple[str, str]:
    """Whether a decision holds beyond the boots it was measured in (module docstring): its
    status and, when that is in question, why."""
    if rule.boot_known:
        return DECIDED, ""
    won = [e for e in evidence if e.point == winner and e.verdict == BETTER]
    single = [p for e in won for p in (e.point, e.versus)
              if (lv := levels(repeats.get(e.metric, {}).get(p, {}).get(e.concurrency, ())))
              is not None and not lv.two_level]
    if not won or not single:
        return DECIDED, ""
    # per rival, the widest clearance of 0 by an interval's near end over its Cs
    clear: dict[str, float] = {}
    for e in won:
        near = min(abs(e.low_pct), abs(e.high_pct))
        clear[e.versus] = max(clear.get(e.versus, 0.0), near)
    worst = min(clear, key=lambda r: clear[r])
    bound = rule.one_boot_bound_pct
    if clear[worst] >= bound:
        return DECIDED, (f"Within one boot per layout, and every gap clears the one-boot bound "
                         f"±{bound:g} % (the closest, vs {worst}, by {clear[worst]:.2f} %): a "
                         f"boot-to-boot offset within ±{bound:g} % cannot reverse it.")
    return DECIDED_ONE_BOOT, (
        f"{ONE_BOOT_NOTE}: {', '.join(dict.fromkeys(single))} measured in one boot and "
        f"no boot-to-boot variance known; the gap to {worst} clears 0 by only "
        f"{clear[worst]:.2f} % (under the one-boot bound ±{bound:g} %), so a boot offset could "
        "reverse it. Boot again (--ppsweep-boots 2) or state [compare] boot_noise_pct.")
