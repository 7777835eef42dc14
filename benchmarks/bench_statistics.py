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
  for 90 % power (results/stats.repeats_for), for a 2 % gap at σ = 1 %.
- **Sequential repeats** (``[compare] sequential``), side by side with the fixed design at 3
  and at ``max_repeats`` repeats, 2 points × 2 C: the first point is measured while no rival
  exists (it leads, and one point is still to come: rounds to the cap), the second gets rounds
  while its comparison is undecided and reachable (results/stats.more_rounds_to_decide, as
  run/rounds.py asks it), then the answer is decided with α spent over the looks. Printed: its
  A/A false decisions (goal ≤ 5 %, the same as the fixed design's), its power at every gap and
  σ, and per figure the ratio to the fixed design at ``max_repeats`` (false decisions, power,
  rounds spent), and the mean rounds per decision.
- The issue's own cases: one repeat against two, a wide point against a steady one, and a
  0.5 % primary gap with a clearly quieter tie-break.

    python benchmarks/bench_statistics.py [--trials 2000] [--seed 1] [--smoke]

``--smoke``: 60 trials a figure (its rates mean nothing; the code path is the same).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchkit.results import Result, add_smoke, finish, goal, info  # noqa: E402

from pytest_ppsweep.matrix.parse import _max_repeats  # noqa: E402
from pytest_ppsweep.matrix.schema import Reader  # noqa: E402
from pytest_ppsweep.results.answers import DECIDED  # noqa: E402
from pytest_ppsweep.results.decide import decide  # noqa: E402
from pytest_ppsweep.results.objective import PREFILL  # noqa: E402
from pytest_ppsweep.results.stats import (  # noqa: E402
    DEFAULT_RULE,
    Rule,
    more_rounds_to_decide,
    repeats_for,
)

DEFAULT_REPEATS = 3  # [workload] repeats in the seeds' sweep (test_matrix/ppsweep.toml)
FALSE_GOAL = 0.05
POWER_GOAL = 0.90
SIGN_GOAL = DEFAULT_RULE.alpha / 2  # a two-sided test's error in the direction: at most α / 2


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
    d = decide(order, PREFILL, reps, list(range(concs)), DEFAULT_RULE)
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
    rule = Rule(first_look=first, last_look=cap, order=tuple(order))
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
    return finish(results, args.smoke)


if __name__ == "__main__":
    raise SystemExit(main())
