"""One decision among candidate points, with its evidence: every comparison goes through the
noise rule (results/noise.py, the gate's rule) applied to the two points' valid repeats of this
run.

The order of play, written out in each answer's reasons:

1. candidates are ranked by their objective's primary metric (mean over the Cs of each median
   relative to the best one at that C, so each C weighs the same);
2. the leader is compared with every rival at every C: ``better``/``worse`` beyond the noise,
   or ``within noise``;
3. ``decided`` when the leader beats every rival (better at some C, worse at none), or when
   the rivals within noise of it are separated by the tie-break metric the same way;
   otherwise ``inconclusive`` between the leader and the rivals it could not separate from.

The tie-break only separates points that are *equal* on the primary metric: within noise of a
point whose repeats are over the spread limit (``noisy``) says only that the noise is large (a
busy machine's rounds: a 30 % noise hid a 50 % gap on test_matrix/microbatch.toml), so such a
tie is left ``inconclusive``, with the rerun that measures it again, instead of letting a
secondary metric (often one that trades against the primary, like TPOT against output TPS)
pick the winner.

A point with fewer than two valid repeats on both sides gives no noise estimate: the comparison
is ``not compared`` and cannot decide.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from pytest_ppsweep.results.answers import (
    BETTER,
    DECIDED,
    INCONCLUSIVE,
    NO_VALID_POINT,
    NOT_COMPARED,
    WITHIN_NOISE,
    WORSE,
    Evidence,
)
from pytest_ppsweep.results.noise import noise_pct
from pytest_ppsweep.results.objective import higher_is_better, label

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
    unseparated: tuple[str, ...] = ()  # inconclusive: the top points the data cannot separate


def compare(point: str, versus: str, conc: int, metric: str, mine: Sequence[float],
            theirs: Sequence[float]) -> Evidence:
    """``point`` vs ``versus`` at one C on ``metric`` from each one's valid repeats."""
    mine = [v for v in mine if not math.isnan(v)]
    theirs = [v for v in theirs if not math.isnan(v)]
    reps = (len(mine), len(theirs))
    if not mine or not theirs:
        return Evidence(point, versus, conc, metric, math.nan, math.nan, NOT_COMPARED, reps,
                        "no valid repeat")
    a, b = statistics.median(mine), statistics.median(theirs)
    delta = (a / b - 1.0) * 100.0 if b else math.nan
    if (len(mine) < 2 and len(theirs) < 2) or math.isnan(delta):
        return Evidence(point, versus, conc, metric, delta, math.nan, NOT_COMPARED, reps,
                        "fewer than 2 valid repeats: no noise estimate")
    noise = noise_pct(theirs, mine)
    gain = delta if higher_is_better(metric) else -delta
    verdict = BETTER if gain > noise else WORSE if gain < -noise else WITHIN_NOISE
    return Evidence(point, versus, conc, metric, delta, noise, verdict, reps)


def outcome(evidence: Sequence[Evidence]) -> str:
    """Over the Cs: ``better`` (better at some C, worse at none), ``worse``, ``within noise``
    (at every C), ``not compared`` (some C could not be compared and none decided) or
    ``mixed`` (better at one C, worse at another: a trade-off, not noise)."""
    verdicts = {e.verdict for e in evidence}
    if BETTER in verdicts and WORSE in verdicts:
        return "mixed"
    if BETTER in verdicts:
        return BETTER
    if WORSE in verdicts:
        return WORSE
    return NOT_COMPARED if NOT_COMPARED in verdicts else WITHIN_NOISE


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


def _pairs(a: str, b: str, metric: str, values: Repeats, concs: Sequence[int]) -> list[Evidence]:
    return [compare(a, b, c, metric, values[a].get(c, ()), values[b].get(c, ())) for c in concs]


def _say(ev: Sequence[Evidence]) -> str:
    return "; ".join(
        f"C={e.concurrency} {e.delta_pct:+.2f} % (noise {e.noise_pct:.2f} %): {e.verdict}"
        if not math.isnan(e.noise_pct) else f"C={e.concurrency}: {e.verdict} ({e.note})"
        for e in ev)


def decide(candidates: Sequence[str], objective: Sequence[str],
           repeats: Mapping[str, Repeats], concs: Sequence[int],
           noisy: Collection[str] = ()) -> Decision:
    """Rank ``candidates`` (sweep order) by ``objective`` (primary metric, then tie-break) from
    ``repeats[metric][point][C]`` and decide (module docstring); ``noisy``: the candidates
    over the spread limit (a tie with one of them is not broken)."""
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
        return Decision(DECIDED, ranking[0], tuple(ranking), (),
                        (f"{ranking[0]} is the only valid point.",))
    evidence: list[Evidence] = []
    reasons: list[str] = []
    leader = ranking[0]
    tied: list[str] = []
    open_: list[str] = []
    for rival in ranking[1:]:
        ev = _pairs(leader, rival, primary, values, concs)
        evidence += ev
        result = outcome(ev)
        if result == BETTER:
            reasons.append(f"{leader} beats {rival} on {label(primary)}: {_say(ev)}.")
        elif result == WITHIN_NOISE:
            tied.append(rival)
        else:
            open_.append(rival)
            reasons.append(f"{leader} vs {rival} on {label(primary)}: {result} ({_say(ev)}).")
    winner = leader
    loud = [p for p in (leader, *tied) if p in noisy] if tied else []
    if tied and loud:
        open_ += tied
        reasons.append(f"{label(primary)} of {leader} and {', '.join(tied)} within noise, but "
                       f"{', '.join(loud)} over the spread limit: the noise, not a tie, keeps "
                       "them together, and the tie-break does not decide.")
    elif tied:
        names = ", ".join(tied)
        if tie is None:
            open_ += tied
            reasons.append(f"{label(primary)} of {leader} and {names} within noise, and the "
                           "objective has no tie-break.")
        else:
            group = [leader, *tied]
            tvals = repeats.get(tie, {})
            winner = sorted(group, key=lambda p: (-_score({q: tvals.get(q, {}) for q in group},
                                                          p, tie, concs), order[p]))[0]
            reasons.append(f"{label(primary)} within noise between {', '.join(group)}; "
                           f"the tie-break is {label(tie)}.")
            for rival in group:
                if rival == winner:
                    continue
                ev = _pairs(winner, rival, tie, tvals, concs)
                evidence += ev
                if outcome(ev) == BETTER:
                    reasons.append(f"{winner} beats {rival} on {label(tie)}: {_say(ev)}.")
                else:
                    open_.append(rival)
                    reasons.append(f"{winner} vs {rival} on {label(tie)}: {outcome(ev)} "
                                   f"({_say(ev)}).")
            if winner != leader:
                # The tie-break winner must also beat, on the primary metric, every rival the
                # leader beat (it is only within noise of the leader).
                for rival in ranking[1:]:
                    if rival in group:
                        continue
                    ev = _pairs(winner, rival, primary, values, concs)
                    evidence += ev
                    if outcome(ev) != BETTER:
                        open_.append(rival)
                ranking = [winner, *[p for p in ranking if p != winner]]
    if open_:
        unseparated = tuple(dict.fromkeys([winner, *open_]))
        return Decision(INCONCLUSIVE, None, tuple(ranking), tuple(evidence),
                        (f"The data cannot separate {', '.join(unseparated)}.", *reasons),
                        unseparated)
    head = (f"{winner} beats every rival beyond noise on {label(primary)}."
            if not tied else f"{winner} is decided by the tie-break ({label(tie or primary)}).")
    return Decision(DECIDED, winner, tuple(ranking), tuple(evidence), (head, *reasons))
