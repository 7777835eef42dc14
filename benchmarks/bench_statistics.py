"""How often is a decision wrong, and how often does it find a real gap? (issue 37, point 9)

Synthetic truths, no servers, seconds: each trial draws the repeats of two points at every C as
``truth × exp(N(0, σ))`` (multiplicative round noise, independent rounds) and feeds them to
``results.decide`` with the default rule (``[compare] alpha`` = 0.05, ``min_effect_pct`` = 1 %)
and the prefill objective (Input TPS, then TTFT p50, whose truths are equal: a tie-break that
decides is a false decision too). Figures:

- **A/A false decisions** at 1, 2, 4 and 6 C: identical points, σ = 1 %, at the workload's
  default 3 repeats and at the sweep's default ``max_repeats`` (8). Any ``decided`` is false.
  Goal ≤ 5 % (the rule's α, family-wise over the question's Cs by Holm).
- **Power** at true gaps of 1, 2 and 5 % (every C, 2 C like the seeds' sweep) with σ = 1 % and
  3 %, at 3 and at 8 repeats: the share of trials that decide for the faster point. Goal ≥ 90 %
  for a 2 % gap at σ = 1 % within the default ``max_repeats``, i.e. at 8 repeats per point.
  Decisions for the slower point are counted too (goal ≤ α / 2, a two-sided test's bound on
  an error of direction).
- **Rounds spent**: per decision, points × C × repeats (the rule is fixed-size: it spends what
  the sweep planned), and the repeats that an inconclusive answer's rerun asks for, computed
  for 90 % power (stats/power.repeats_for), for a 2 % gap at σ = 1 %.
- **Sequential repeats** (``[compare] sequential``), side by side with the fixed design at 3
  and at ``max_repeats`` repeats, 2 points × 2 C: the first point is measured while no rival
  exists (it leads, and one point is still to come: rounds to the cap), the second gets rounds
  while its comparison is undecided and reachable (stats/decision.more_rounds_to_decide, as
  run/rounds.py asks it), then the answer is decided with α spent over the looks. Printed: its
  A/A false decisions (goal ≤ 5 %, the same as the fixed design's), its power at every gap and
  σ, and per figure the ratio to the fixed design at ``max_repeats`` (false decisions, power,
  rounds spent), and the mean rounds per decision.
- The issue's own cases: one repeat against two, a wide point against a steady one, and a
  0.5 % primary gap with a clearly quieter tie-break; and a true gap of exactly the equivalence
  margin whose slower point has the better tie-break (goal: picked the slower way ≤ 0.2 α, the
  tie-break's share: equivalence is shown at that share when a tie-break follows).
- **The boot level.** The figures above draw independent rounds with no boot effect, and say
  so to the rule (``NO_BOOT_EFFECT``: boots stated not to differ, as ``[compare]
  boot_noise_pct = 0`` would). The boot cells draw every boot an offset of σ 1 % and 2 % on
  the log scale (the audit's cells) over rounds of σ 0.5 %, two identical points of 1, 2 and 3
  boots × 3 rounds each, under the default rule (no boot-to-boot source: a single-boot
  decision must clear the one-boot bound, else it is "decided within one boot"), and with the
  offset stated as ``boot_noise_pct``. Goal: plain ``decided`` ≤ 5 % in every cell; the share
  "decided within one boot" is printed beside it.
- **The spread rule's extra rounds.** Two points of one C, rounds of σ 2, 3 and 4 %, each
  extended by the default spread rule (one more round while the rounds nearest its median
  spread beyond 2 %, up to ``max_repeats``), decided on the same draws three ways: Stein's
  two-stage level (the rule's: every round's mean, the planned rounds' variance), every
  round's variance, and the planned rounds alone. A/A goal ≤ 5 % for the rule's way; the
  others' rates, every way's power at a gap of twice σ and the rounds a point spends are
  printed beside it.
- **A tied best pair among five layouts** (the seeds' five, PP4 lifted to PP8's Input TPS), each
  booted once with an offset of σ 1 or 2 % and rounds of σ 0.5 %, 3 repeats, 2 C, under the
  default rule and with the offset stated: any plain ``decided`` picks one of a tied pair
  (goal ≤ 5 %); the share "decided within one boot" is printed beside it.
- **The default path**, end to end: 2 points × 2 C, 3 planned rounds extended by the spread
  rule, the default rule; A/A (goal ≤ 5 %) and its power at a 2 % gap, σ 1 % (stated: the
  power goal is the 8-repeat and sequential designs').

    python benchmarks/bench_statistics.py [--trials 2000] [--seed 1] [--smoke]

``--smoke``: 60 trials a figure (its rates mean nothing; the code path is the same).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchkit.results import Result, add_smoke, finish, goal, info  # noqa: E402

from pytest_ppsweep.matrix.parse import _max_repeats  # noqa: E402
from pytest_ppsweep.matrix.schema import Reader  # noqa: E402
from pytest_ppsweep.results.answers import DECIDED, DECIDED_ONE_BOOT  # noqa: E402
from pytest_ppsweep.results.decide import decide  # noqa: E402
from pytest_ppsweep.results.objective import PREFILL  # noqa: E402
from pytest_ppsweep.stats.decision import (  # noqa: E402
    DEFAULT_RULE,
    Rule,
    Sample,
    more_rounds_to_decide,
    offset_var,
)
from pytest_ppsweep.stats.power import repeats_for  # noqa: E402
from pytest_ppsweep.stats.spread import more_rounds  # noqa: E402

DEFAULT_REPEATS = 3  # [workload] repeats in the seeds' sweep (test_matrix/ppsweep.toml)
FALSE_GOAL = 0.05
POWER_GOAL = 0.90
SIGN_GOAL = DEFAULT_RULE.alpha / 2  # a two-sided test's error in the direction: at most α / 2
SPREAD_THRESHOLD_PCT = 2.0  # [sweep] spread_threshold's default (0.02)
# The synthetic truths have no boot effect, and the rule is told so (module docstring).
NO_BOOT_EFFECT = replace(DEFAULT_RULE, boot_var=0.0, boot_source="no boot effect (synthetic)")


def boot_trial(rng: random.Random, sigma_b_pct: float, boots: int, rule: Rule) -> str:
    """A/A at the boot level: two identical points, ``boots`` boots × 3 rounds each, every
    boot offset by N(0, σ_b), every round by N(0, 0.5 %), 1 C; the status."""
    sb, sw = math.log1p(sigma_b_pct / 100.0), math.log1p(0.5 / 100.0)
    reps: dict[str, dict[str, dict[int, Sample]]] = {"input_tps": {}}
    for p in ("a", "b"):
        values, ids = [], []
        for k in range(boots):
            off = rng.gauss(0, sb)
            values += [1000.0 * math.exp(off + rng.gauss(0, sw)) for _ in range(3)]
            ids += [f"{p}{k}"] * 3
        reps["input_tps"][p] = {0: Sample(values, ids)}
    return decide(["a", "b"], ("input_tps",), reps, [0], rule).status


def boot_figures(rng: random.Random, trials: int) -> list[Result]:
    """The boot cells (module docstring)."""
    out = []
    for sigma_b in (1.0, 2.0):
        stated = replace(DEFAULT_RULE, boot_var=offset_var(sigma_b), boot_source="stated")
        for boots in (1, 2, 3):
            for name, rule in (("default rule", DEFAULT_RULE),
                               (f"boot_noise_pct = {sigma_b:g}", stated)):
                got = [boot_trial(rng, sigma_b, boots, rule) for _ in range(trials)]
                out.append(level_figure(
                    "A/A", f"boot offset σ {sigma_b:g} %, {boots} boot(s) × 3 rounds, {name}",
                    got))
    return out


def level_figure(prefix: str, where: str, statuses: list[str]) -> Result:
    """A cell whose every plain ``decided`` is false: its rate against the goal, with the share
    ``decided within one boot`` beside it (printed as it is measured)."""
    trials = len(statuses)
    false = statuses.count(DECIDED) / trials
    within = statuses.count(DECIDED_ONE_BOOT) / trials
    print(f"{prefix} {where}: decided {false:.1%}, within one boot {within:.1%}".lstrip(),
          flush=True)
    return goal(f"{prefix} false decisions, {where}".lstrip(),
                f"{false:.1%} of {trials} (within one boot {within:.1%})",
                f"<= {FALSE_GOAL:.0%}", false <= FALSE_GOAL)


def spread_point(rng: random.Random, truth: float, sigma: float, top: int) -> list[float]:
    """One point's rounds under the default spread rule: the planned rounds, then one more
    while the rounds nearest the median spread beyond 2 % (stats/spread.more_rounds), up to
    ``top``."""
    values = [truth * math.exp(rng.gauss(0, sigma)) for _ in range(DEFAULT_REPEATS)]
    while more_rounds(values, DEFAULT_REPEATS, SPREAD_THRESHOLD_PCT, top):
        values.append(truth * math.exp(rng.gauss(0, sigma)))
    return values


SPREAD_VARIANTS = ("Stein (the default)", "every round", "planned rounds only")


def spread_figures(rng: random.Random, trials: int, top: int) -> list[Result]:
    """The spread-rule cells: two points of one C whose rounds the spread rule extends, A/A and
    at a gap of twice σ, decided three ways on the same draws: Stein's two-stage level (the
    rule's: the planned rounds' variance), every round's variance, and the planned rounds
    alone."""
    out = []
    stein_rule = replace(NO_BOOT_EFFECT, planned=DEFAULT_REPEATS)
    for sigma_pct in (2.0, 3.0, 4.0):
        sigma = math.log1p(sigma_pct / 100.0)
        for gap_pct in (0.0, 2 * sigma_pct):
            wins = dict.fromkeys(SPREAD_VARIANTS, 0)
            slow = dict.fromkeys(SPREAD_VARIANTS, 0)
            rounds = 0
            for _ in range(trials):
                fast = spread_point(rng, 1000.0 * (1 + gap_pct / 100.0), sigma, top)
                base = spread_point(rng, 1000.0, sigma, top)
                rounds += len(fast) + len(base)
                ways = {"Stein (the default)": (fast, base, stein_rule),
                        "every round": (fast, base, NO_BOOT_EFFECT),
                        "planned rounds only": (fast[:DEFAULT_REPEATS], base[:DEFAULT_REPEATS],
                                                NO_BOOT_EFFECT)}
                for name, (a, b, rule) in ways.items():
                    d = decide(["a", "b"], ("input_tps",), {"input_tps": {"a": {0: a},
                                                                         "b": {0: b}}},
                               [0], rule)
                    wins[name] += d.status == DECIDED and d.winner == "a"
                    slow[name] += d.status == DECIDED and d.winner == "b"
            where = f"spread rule, sigma {sigma_pct:g} %, 1 C"
            for name in SPREAD_VARIANTS:
                if gap_pct == 0.0:
                    false = (wins[name] + slow[name]) / trials
                    text = f"{false:.1%} of {trials}"
                    if name == SPREAD_VARIANTS[0]:
                        out.append(goal(f"A/A false decisions, {where}, {name}", text,
                                        f"<= {FALSE_GOAL:.0%}", false <= FALSE_GOAL))
                    else:
                        out.append(info(f"A/A false decisions, {where}, {name}", text))
                else:
                    out.append(info(f"power, gap {gap_pct:g} %, {where}, {name}",
                                    f"{wins[name] / trials:.1%} of {trials}"))
            print(f"{where}, gap {gap_pct:g} %: decided {wins} / wrong way {slow}; "
                  f"{rounds / (2 * trials):.2f} rounds a point", flush=True)
            if gap_pct == 0.0:
                out.append(info(f"rounds a point, {where}", f"{rounds / (2 * trials):.2f}"))
    return out


def default_path_figures(rng: random.Random, trials: int, top: int) -> list[Result]:
    """The default path, end to end: two points × 2 C, the planned 3 rounds extended by the
    spread rule, decided by the default rule (Stein's level for extended points), σ 1 % a
    round; A/A and at a 2 % gap, with the rounds spent. The power goal (≥ 90 % for 2 % within
    ``max_repeats``) is a goal of the 8-repeat and sequential designs; this figure states what
    the default path gets."""
    out = []
    sigma = math.log1p(1.0 / 100.0)
    rule = replace(NO_BOOT_EFFECT, planned=DEFAULT_REPEATS)
    for gap_pct in (0.0, 2.0):
        decided = wrong = rounds = 0
        for _ in range(trials):
            truth = {"fast": 1000.0 * (1 + gap_pct / 100.0), "slow": 1000.0}
            values = {p: {c: spread_point(rng, t, sigma, top) for c in range(2)}
                      for p, t in truth.items()}
            rounds += sum(len(v) for per_c in values.values() for v in per_c.values())
            reps = {"input_tps": values,
                    "ttft_p50_s": {p: {c: [10.0] * len(v) for c, v in per_c.items()}
                                   for p, per_c in values.items()}}
            order = ["slow", "fast"] if rng.random() < 0.5 else ["fast", "slow"]
            d = decide(order, PREFILL, reps, [0, 1], rule)
            decided += d.status == DECIDED and d.winner == "fast"
            wrong += d.status == DECIDED and d.winner == "slow"
        where = "default path (3 repeats + spread rule, Stein), sigma 1 %, 2 C"
        per = rounds / trials
        if gap_pct == 0.0:
            false = (decided + wrong) / trials
            out.append(goal(f"A/A false decisions, {where}", f"{false:.1%} of {trials}",
                            f"<= {FALSE_GOAL:.0%}", false <= FALSE_GOAL))
        else:
            out.append(info(f"power, gap 2 %, {where}", f"{decided / trials:.1%} of {trials} "
                            f"({per:.1f} rounds a decision; the 90 % goal needs 8 repeats or "
                            "sequential looks)"))
        print(f"{where}, gap {gap_pct:g} %: decided {decided}, wrong way {wrong}, "
              f"{per:.1f} rounds a decision", flush=True)
    return out


# The seeds' five layouts (Input TPS at C=8, test_matrix/ppsweep.toml's report), PP4 lifted to
# PP8's: a tied best pair among five.
TIED_FIVE = {"pp1": 3258.0, "pp2": 5016.0, "pp4": 8810.0, "pp8": 8810.0, "pp16": 6701.0}


def tied_five_figures(rng: random.Random, trials: int) -> list[Result]:
    """Five layouts whose best two are tied, each booted once with a boot offset of σ_b 1 % or
    2 % and rounds of σ 0.5 %, 3 repeats, 2 C: how often the question is plainly decided (any
    decided answer picks one of a tied pair: false), under the default rule and with the offset
    stated as ``boot_noise_pct``."""
    out = []
    sw = math.log1p(0.5 / 100.0)
    for sigma_b in (1.0, 2.0):
        sb = math.log1p(sigma_b / 100.0)
        stated = replace(DEFAULT_RULE, boot_var=offset_var(sigma_b), boot_source="stated")
        for name, rule in (("default rule", DEFAULT_RULE),
                           (f"boot_noise_pct = {sigma_b:g}", stated)):
            got = []
            for _ in range(trials):
                reps: dict[str, dict[str, dict[int, Sample]]] = {"input_tps": {}}
                for p, truth in TIED_FIVE.items():
                    off = rng.gauss(0, sb)
                    reps["input_tps"][p] = {c: Sample([truth * math.exp(off + rng.gauss(0, sw))
                                                       for _ in range(DEFAULT_REPEATS)],
                                                      [p] * DEFAULT_REPEATS) for c in range(2)}
                got.append(decide(list(TIED_FIVE), ("input_tps",), reps, [0, 1], rule).status)
            out.append(level_figure(
                "", f"five layouts, best two tied, boot offset σ {sigma_b:g} %, {name}", got))
    return out


def default_max_repeats() -> int:
    """``[sweep] max_repeats`` when the file does not set it (matrix/parse.py's default)."""
    return _max_repeats(Reader(Path("default.toml"), {}, "sweep"), DEFAULT_REPEATS)


def trial(rng: random.Random, gap_pct: float, sigma_pct: float, concs: int, n: int) -> str:
    """One decision between ``fast`` (true gap ``gap_pct`` on Input TPS at every C) and
    ``slow``: ``fast``, ``slow`` (decided for either) or the status otherwise."""
    sigma = math.log1p(sigma_pct / 100.0)
    truth = {"fast": 1000.0 * (1 + gap_pct / 100.0), "slow": 1000.0}
    reps = {m: {p: {c: [(t if m == "input_tps" else 10.0) * math.exp(rng.gauss(0, sigma))
                        for _ in range(n)] for c in range(concs)} for p, t in truth.items()}
            for m in PREFILL}
    order = ["slow", "fast"] if rng.random() < 0.5 else ["fast", "slow"]
    d = decide(order, PREFILL, reps, list(range(concs)), NO_BOOT_EFFECT)
    return str(d.winner) if d.status == DECIDED else d.status


def rate(rng: random.Random, trials: int, gap_pct: float, sigma_pct: float, concs: int,
         n: int) -> dict[str, float]:
    counts: dict[str, int] = {}
    for _ in range(trials):
        got = trial(rng, gap_pct, sigma_pct, concs, n)
        counts[got] = counts.get(got, 0) + 1
    return {k: v / trials for k, v in counts.items()}


def sequential_trial(rng: random.Random, gap_pct: float, sigma_pct: float, concs: int,
                     first: int, cap: int) -> tuple[str, int]:
    """One sequential decision between ``fast`` and ``slow`` (measured in a random order, as
    a sweep's layouts are): the status or winner, and the rounds spent (both points, every
    C)."""
    sigma = math.log1p(sigma_pct / 100.0)
    truth = {"fast": 1000.0 * (1 + gap_pct / 100.0), "slow": 1000.0}
    order = ["slow", "fast"] if rng.random() < 0.5 else ["fast", "slow"]
    rule = replace(NO_BOOT_EFFECT, first_look=first, last_look=cap, order=tuple(order))
    reps: dict[str, dict[str, dict[int, list[float]]]] = {m: {p: {} for p in truth}
                                                           for m in PREFILL}

    def draw(point: str, metric: str) -> float:
        return (truth[point] if metric == "input_tps" else 10.0) * math.exp(rng.gauss(0, sigma))

    for i, point in enumerate(order):
        for c in range(concs):
            for m in PREFILL:
                reps[m][point][c] = [draw(point, m) for _ in range(first)]
            while more_rounds_to_decide(
                    reps["input_tps"][point][c],
                    {q: reps["input_tps"][q][c] for q in order[:i]}, True, rule,
                    family=max(1, i) * concs, tie_break=True, later=len(order) - 1 - i):
                for m in PREFILL:
                    reps[m][point][c].append(draw(point, m))
    spent = sum(len(v) for v in reps["input_tps"].values() for v in v.values())
    d = decide(order, PREFILL, reps, list(range(concs)), rule)
    return (str(d.winner) if d.status == DECIDED else d.status), spent


def sequential_rate(rng: random.Random, trials: int, gap_pct: float, sigma_pct: float,
                    concs: int, first: int, cap: int) -> tuple[dict[str, float], float]:
    counts: dict[str, int] = {}
    spent = 0
    for _ in range(trials):
        got, n = sequential_trial(rng, gap_pct, sigma_pct, concs, first, cap)
        counts[got] = counts.get(got, 0) + 1
        spent += n
    return {k: v / trials for k, v in counts.items()}, spent / trials


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else ("1.00" if not a else "inf")


def sequential_figures(rng: random.Random, trials: int, top: int) -> list[Result]:
    """The sequential rule beside the fixed design (module docstring), 2 points × 2 C."""
    out: list[Result] = []
    fixed_rounds = 2 * 2 * top
    for sigma, gap in ((1.0, 0.0), (1.0, 1.0), (1.0, 2.0), (1.0, 5.0), (3.0, 0.0), (3.0, 2.0),
                       (3.0, 5.0)):
        seq, rounds = sequential_rate(rng, trials, gap, sigma, 2, DEFAULT_REPEATS, top)
        fixed = rate(rng, trials, gap, sigma, 2, top)
        small = rate(rng, trials, gap, sigma, 2, DEFAULT_REPEATS)
        where = f"gap {gap:g} %, sigma {sigma:g} %, 2 C"
        print(f"sequential {where}: {seq}, {rounds:.1f} rounds; fixed {top}: {fixed}; "
              f"fixed {DEFAULT_REPEATS}: {small}", flush=True)
        if gap == 0.0:
            false_seq = seq.get("fast", 0.0) + seq.get("slow", 0.0)
            false_fix = fixed.get("fast", 0.0) + fixed.get("slow", 0.0)
            out.append(goal(f"sequential A/A false decisions, {where}", f"{false_seq:.1%} of "
                            f"{trials} (fixed {top}: {false_fix:.1%}, ratio "
                            f"{_ratio(false_seq, false_fix)})", f"<= {FALSE_GOAL:.0%}",
                            false_seq <= FALSE_GOAL))
        else:
            power, wrong = seq.get("fast", 0.0), seq.get("slow", 0.0)
            out.append(info(f"sequential power, {where}", f"{power:.1%} (fixed {top}: "
                            f"{fixed.get('fast', 0.0):.1%}, ratio "
                            f"{_ratio(power, fixed.get('fast', 0.0))}; fixed "
                            f"{DEFAULT_REPEATS}: {small.get('fast', 0.0):.1%})"))
            out.append(goal(f"sequential, decided for the slower point, {where}",
                            f"{wrong:.1%}", f"<= {SIGN_GOAL:.1%}", wrong <= SIGN_GOAL))
        out.append(info(f"sequential rounds per decision, {where}",
                        f"{rounds:.1f} (fixed {top}: {fixed_rounds}, ratio "
                        f"{_ratio(rounds, fixed_rounds)}; fixed {DEFAULT_REPEATS}: "
                        f"{2 * 2 * DEFAULT_REPEATS})"))
    return out


def issue_cases() -> list[Result]:
    """The cases issue 37 names, each through ``decide``."""
    one = decide(["a", "b"], ("input_tps",), {"input_tps": {"a": {8: [1001.0]},
                                                          "b": {8: [1000.0, 1000.1]}}}, [8])
    wide = decide(["loud", "calm"], ("input_tps",), {"input_tps": {
        "loud": {8: [1300.0, 1000.0, 1400.0]}, "calm": {8: [1000.0, 1000.5, 999.5]}}}, [8])
    return [
        goal("one repeat against two ([1001] vs [1000, 1000.1])", one.status,
             "not decided", one.status != DECIDED),
        goal("a wide point against a steady one ([1300, 1000, 1400] vs 1000)", wide.status,
             "not decided", wide.status != DECIDED),
    ]


def tie_break_case(rng: random.Random, trials: int) -> Result:
    """A 0.5 % primary gap at σ = 1 % and 3 repeats, the slower point's TTFT 10 % better with
    σ = 0.1 %: how often the tie-break decides (the old rule: 367 of 400)."""
    decided = 0
    for _ in range(trials):
        s1, s2 = math.log1p(0.01), math.log1p(0.001)
        reps = {"input_tps": {"a": {8: [1005.0 * math.exp(rng.gauss(0, s1)) for _ in range(3)]},
                              "b": {8: [1000.0 * math.exp(rng.gauss(0, s1)) for _ in range(3)]}},
                "ttft_p50_s": {"a": {8: [10.0 * math.exp(rng.gauss(0, s2)) for _ in range(3)]},
                               "b": {8: [9.0 * math.exp(rng.gauss(0, s2)) for _ in range(3)]}}}
        d = decide(["a", "b"], PREFILL, reps, [8])
        decided += d.status == DECIDED and any("tie-break" in r for r in d.reasons)
    return goal("a 0.5 % primary gap decided by a quieter tie-break at 3 repeats",
                f"{decided}/{trials} ({decided / trials:.1%})", "<= 5 % (was 367/400)",
                decided / trials <= FALSE_GOAL)


def margin_pick_case(rng: random.Random, trials: int) -> Result:
    """A true gap of exactly ``min_effect_pct`` (1 %) on Input TPS at σ 0.2 % and 8 repeats, 1
    C, the slower point's TTFT 10 % better (σ 0.1 %): a false equivalence hands the pick to the
    tie-break, which then picks the slower point. Goal: ≤ the tie-break's share of α."""
    slow_picks = 0
    s1, s2 = math.log1p(0.002), math.log1p(0.001)
    for _ in range(trials):
        reps = {"input_tps": {p: {0: [t * math.exp(rng.gauss(0, s1)) for _ in range(8)]}
                              for p, t in (("fast", 1010.0), ("slow", 1000.0))},
                "ttft_p50_s": {p: {0: [t * math.exp(rng.gauss(0, s2)) for _ in range(8)]}
                               for p, t in (("fast", 10.0), ("slow", 9.0))}}
        d = decide(["fast", "slow"], PREFILL, reps, [0])
        slow_picks += d.status == DECIDED and d.winner == "slow"
    share = DEFAULT_RULE.alpha * DEFAULT_RULE.tie_share
    return goal("a gap of exactly min_effect picked the slower way through the tie-break",
                f"{slow_picks}/{trials} ({slow_picks / trials:.1%})", f"<= {share:.0%}",
                slow_picks / trials <= share)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    add_smoke(ap, "60 trials a figure")
    args = ap.parse_args()
    trials = 60 if args.smoke else args.trials
    rng = random.Random(args.seed)
    top = default_max_repeats()
    results: list[Result] = []
    for n in (DEFAULT_REPEATS, top):
        for concs in (1, 2, 4, 6):
            r = rate(rng, trials, 0.0, 1.0, concs, n)
            false = sum(v for k, v in r.items() if k in ("fast", "slow"))
            results.append(goal(f"A/A false decisions, {concs} C, {n} repeats, sigma 1 %",
                                f"{false:.1%} of {trials}", f"<= {FALSE_GOAL:.0%}",
                                false <= FALSE_GOAL))
            print(f"A/A {concs} C {n} repeats: {r}", flush=True)
    for sigma in (1.0, 3.0):
        for gap in (1.0, 2.0, 5.0):
            for n in (DEFAULT_REPEATS, top):
                r = rate(rng, trials, gap, sigma, 2, n)
                power, wrong = r.get("fast", 0.0), r.get("slow", 0.0)
                name = f"power, gap {gap:g} %, sigma {sigma:g} %, 2 C, {n} repeats"
                print(f"{name}: {r}", flush=True)
                if gap == 2.0 and sigma == 1.0 and n == top:
                    results.append(goal(name, f"{power:.1%} of {trials}",
                                        f">= {POWER_GOAL:.0%} (default max_repeats {top})",
                                        power >= POWER_GOAL))
                else:
                    results.append(info(name, f"{power:.1%} of {trials}"))
                results.append(goal(f"decided for the slower point, gap {gap:g} %, sigma "
                                    f"{sigma:g} %, {n} repeats", f"{wrong:.1%}",
                                    f"<= {SIGN_GOAL:.1%}", wrong <= SIGN_GOAL))
    for n in (DEFAULT_REPEATS, top):
        results.append(info(f"rounds spent per decision, 2 points x 2 C x {n} repeats",
                            str(2 * 2 * n)))
    need = repeats_for(2.0, 1.0, DEFAULT_RULE, family=2)
    results.append(goal("repeats a rerun asks for, 2 % gap, sigma 1 %, 2 C (90 % power)",
                        str(need), f"<= default max_repeats {top}", need <= top))
    results += sequential_figures(rng, trials, top)
    results += issue_cases()
    results.append(tie_break_case(rng, trials))
    results.append(margin_pick_case(rng, trials))
    results += boot_figures(rng, trials)
    results += spread_figures(rng, trials, top)
    results += default_path_figures(rng, trials, top)
    results += tied_five_figures(rng, trials)
    return finish(results, args.smoke)


if __name__ == "__main__":
    raise SystemExit(main())
