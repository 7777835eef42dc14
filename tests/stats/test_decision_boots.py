"""Two levels, rounds within boots: the variance components of a point measured
over several boots, its side of a comparison with the boot as the unit, the boots × rounds a
rerun needs, and what an answer says about its level (stats/decision.py, results/questions.py)."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.runs import SEED_LAYOUTS, config_row, rounds, seed_points, write_run

from pytest_ppsweep.report import answerview
from pytest_ppsweep.report.answerview import paragraph
from pytest_ppsweep.results.answers import DECIDED, DECIDED_ONE_BOOT, INCONCLUSIVE, ONE_BOOT_NOTE
from pytest_ppsweep.results.decide import decide
from pytest_ppsweep.results.pipeline import analyse
from pytest_ppsweep.results.questions import SINGLE_BOOT_NOTE, TWO_LEVEL_NOTE
from pytest_ppsweep.stats.decision import (
    DEFAULT_RULE,
    Rule,
    Sample,
    boots_of,
    half_width_pct,
    interval,
    levels,
    offset_var,
)
from pytest_ppsweep.stats.power import boots_for
from pytest_ppsweep.stats.studentt import t_ppf

PP4, PP8 = "pp4-tp8-ep4", "pp8-tp4-ep4"


def test_one_boot_is_the_rounds_level() -> None:
    values = [1000.0, 1010.0, 990.0, 1005.0]
    logs = [math.log(v) for v in values]
    found = levels(Sample(values, ["b1"] * 4))
    assert found is not None and not found.two_level and found.boots == 1
    assert found.var_mean == pytest.approx(statistics.variance(logs) / 4)
    assert found.df == 3 and math.isnan(found.between)
    assert levels(values) == found  # no boots named: the same level
    assert levels([1000.0]) is None and levels(Sample([1000.0, -1.0], ["a", "b"])) is None


def test_two_boots_anova_components_by_hand() -> None:
    # log values: boot a 0, 0.02 (mean 0.01); boot b 0.1, 0.12 (mean 0.11)
    logs = [0.0, 0.02, 0.1, 0.12]
    found = levels(Sample([math.exp(x) for x in logs], ["a", "a", "b", "b"]))
    assert found is not None and found.two_level and found.boots == 2 and found.rounds == 4
    # MS_within = 4 x 0.01² / (4 - 2); MS_between = 2 x 2 x 0.05² / 1; n0 = 2
    assert found.within == pytest.approx(0.0002)
    assert found.between == pytest.approx((0.01 - 0.0002) / 2)
    # the boot is the unit: the variance of the two boot means over 2, one degree of freedom
    assert found.mean == pytest.approx(0.06)
    assert found.var_mean == pytest.approx(statistics.variance([0.01, 0.11]) / 2)
    assert found.df == 1
    # boots that agree better than their rounds: the between component is 0, never negative
    flat = levels(Sample([math.exp(x) for x in (0.0, 0.02, 0.0, 0.02)], ["a", "a", "b", "b"]))
    assert flat is not None and flat.between == 0.0


def test_a_second_boot_widens_the_interval_honestly() -> None:
    rng = random.Random(3)
    a = [1000 * math.exp(rng.gauss(0, 0.005)) for _ in range(3)] + [
        1030 * math.exp(rng.gauss(0, 0.005)) for _ in range(3)]
    b = [1010 * math.exp(rng.gauss(0, 0.005)) for _ in range(6)]
    pooled = interval(a, b)
    two = interval(Sample(a, ["x"] * 3 + ["y"] * 3), Sample(b, ["z"] * 6))
    assert pooled is not None and two is not None
    assert two.delta_pct == pytest.approx(pooled.delta_pct)  # equal boot sizes: same estimate
    assert two.half_width_pct > 2 * pooled.half_width_pct
    assert two.df < pooled.df
    # the point's own interval takes its level too: t with 1 degree of freedom
    own = half_width_pct(Sample(a, ["x"] * 3 + ["y"] * 3))
    boot_means = [statistics.fmean(math.log(v) for v in a[:3]),
                  statistics.fmean(math.log(v) for v in a[3:])]
    se = statistics.stdev(boot_means) / math.sqrt(2)
    assert own == pytest.approx(math.expm1(t_ppf(0.975, 1) * se) * 100)
    # a Sample keeps its boots through the sequential looks' prefixes
    seq = interval(Sample(a, ["x"] * 3 + ["y"] * 3), Sample(b, ["z"] * 6),
                   Rule(first_look=3, last_look=6), later=True)
    assert seq is not None and seq.half_width_pct > pooled.half_width_pct
    assert boots_of(Sample(a, ["x"] * 6)) == ("x",) * 6 and boots_of(a) == ()
    with pytest.raises(ValueError, match="6 values but 2 boots"):
        Sample(a, ["x", "y"])


def _false_decisions(two_level: bool, draws: int, sigma_b: float, sigma_w: float,
                     rule: Rule = DEFAULT_RULE, boots: int = 2,
                     statuses: tuple[str, ...] = (DECIDED,)) -> float:
    """A/A: both points have the same truth, ``boots`` boots × 3 rounds each, every boot offset
    by N(0, sigma_b) in log, every round by N(0, sigma_w); the share of draws whose status is
    one of ``statuses``."""
    rng = random.Random(11)
    wrong = 0
    for _ in range(draws):
        reps: dict[str, dict[str, dict[int, Any]]] = {"input_tps": {}}
        for p in ("a", "b"):
            values, ids = [], []
            for boot in range(boots):
                off = rng.gauss(0, sigma_b)
                for _r in range(3):
                    values.append(1000 * math.exp(off + rng.gauss(0, sigma_w)))
                    ids.append(f"{p}{boot}")
            reps["input_tps"][p] = {8: Sample(values, ids) if two_level else values}
        wrong += decide(["a", "b"], ("input_tps",), reps, (8,), rule).status in statuses
    return wrong / draws


def test_a_a_false_decisions_with_boot_offsets() -> None:
    """Boot offsets of σ 2 % and rounds of σ 0.3 %: the rounds-only interval separates a false
    winner most of the time, and says so: "decided within one boot", never plain decided
    (the gaps stay under the one-boot bound); with the boot as the unit it stays within α."""
    either = (DECIDED, DECIDED_ONE_BOOT)
    rounds_only = _false_decisions(False, 300, 0.02, 0.003, statuses=either)
    assert rounds_only > 0.3, rounds_only
    assert _false_decisions(False, 300, 0.02, 0.003) <= 0.05 + 0.03
    two = _false_decisions(True, 300, 0.02, 0.003)
    assert two <= 0.05 + 0.03, two  # α plus the draws' own error (300 draws: ±2.5 %)


@pytest.mark.parametrize("sigma_b", [0.01, 0.02])
def test_one_boot_each_with_a_stated_prior_keeps_alpha(sigma_b: float) -> None:
    """One boot per point, offsets of σ 1 % and 2 % (the audit's cells): with the offset stated
    as ``[compare] boot_noise_pct`` the single-boot sides carry it and plain decisions stay
    within α; nothing is left "within one boot" once the variance is known."""
    stated = replace(DEFAULT_RULE, boot_var=offset_var(sigma_b * 100), boot_source="stated")
    plain = _false_decisions(False, 300, sigma_b, 0.005, stated, boots=1)
    assert plain <= 0.05 + 0.03, plain
    assert _false_decisions(False, 300, sigma_b, 0.005, stated, boots=1,
                            statuses=(DECIDED_ONE_BOOT,)) == 0.0


def test_a_large_gap_in_one_boot_is_plainly_decided_and_says_why() -> None:
    """The seeds' kind of gap (27 %) within one boot clears the one-boot bound: decided, with
    the reason; a 3 % gap at the same noise is decided within one boot only."""
    for gap, status in ((1.27, DECIDED), (1.03, DECIDED_ONE_BOOT)):
        reps = {"input_tps": {"a": {8: [gap * 1000 * f for f in (1.0, 1.002, 0.998)]},
                              "b": {8: [1000.0, 1002.0, 998.0]}}}
        d = decide(["a", "b"], ("input_tps",), reps, (8,))
        assert (d.status, d.winner) == (status, "a"), d.reasons
        why = d.reasons[1]
        if status == DECIDED:
            assert why.startswith("Within one boot per layout, and every gap clears"), why
        else:
            assert why.startswith(f"{ONE_BOOT_NOTE}: a, b measured in one boot"), why
            assert "state [compare] boot_noise_pct" in why


def test_boots_for_plans_rounds_by_cost_and_reaches_its_power() -> None:
    # boots that do not differ: as many rounds per boot as allowed, the fewest boots
    assert boots_for(2.0, 1.0, 0.0, max_rounds=8)[1] == 8
    # boots that differ much more than rounds: one round per boot is the cheapest
    k, n = boots_for(5.0, 0.2, 2.0, boot_cost_rounds=10)
    assert n == 1 and k >= 3
    # Kalibera-Jones: n = √(c σ²_w / σ²_b) = √(10 × 1 / 0.25) ≈ 6.3
    assert boots_for(3.0, 1.0, 0.5, boot_cost_rounds=10)[1] == 6
    # its plan reaches the power it states (Monte Carlo: boots as the unit, the true gap)
    gap, within, between = 3.0, 1.0, 1.0
    k, n = boots_for(gap, within, between)
    rng = random.Random(5)
    hits, draws = 0, 300
    sw, sb = math.log1p(within / 100), math.log1p(between / 100)
    for _ in range(draws):
        sides = []
        for p, truth in (("a", math.log1p(gap / 100)), ("b", 0.0)):
            values, boots = [], []
            for boot in range(k):
                off = rng.gauss(0, sb)
                values += [math.exp(truth + off + rng.gauss(0, sw)) for _ in range(n)]
                boots += [f"{p}{boot}"] * n
            sides.append(Sample(values, boots))
        found = interval(sides[0], sides[1])
        hits += found is not None and found.p_value <= 0.05
    assert hits / draws >= 0.85, (k, n, hits / draws)


def _rows(values: dict[str, list[tuple[float, str]]]) -> list[dict[str, Any]]:
    """Rows of PP4 and PP8 at C=8 with the given (Input TPS, boot) per round."""
    out = []
    for p in seed_points([PP4, PP8]):
        if p.concurrency != 8:
            continue
        given = values[p.config_id]
        for row, (tps, boot) in zip(rounds(p, repeats=len(given)), given, strict=True):
            row.update(input_tps=tps, input_tps_nominal=tps, boot=boot)
            out.append(row)
    return out


def _answer(tmp_path: Path, name: str, values: dict[str, list[tuple[float, str]]],
            **meta: Any) -> Any:
    rows = _rows(values)
    configs = [config_row(cid, *SEED_LAYOUTS[cid][:3], i, SEED_LAYOUTS[cid][3])
               for i, cid in enumerate((PP4, PP8))]
    run = write_run(tmp_path / name, rows, configs, baseline=PP4, order=[PP4, PP8],
                    workload={"concurrency": [8], "num_requests": 40,
                              "repeats": max(len(v) for v in values.values())}, **meta)
    pd.DataFrame(rows, columns=[*rows[0]]).to_csv(run / "results.csv", index=False)
    return next(a for a in analyse(run)[3] if a.kind == "layout")


def test_single_boot_answer_says_so_in_answers_and_terminal(tmp_path: Path) -> None:
    layout = _answer(tmp_path, "one", {
        PP8: [(1100.0, "boot-8"), (1102.0, "boot-8"), (1099.0, "boot-8")],
        PP4: [(1000.0, "boot-4"), (1001.0, "boot-4"), (999.0, "boot-4")]})
    assert layout.status == DECIDED and layout.answer == PP8
    assert layout.extra["boots"] == {PP4: 1, PP8: 1} and "levels" not in layout.extra
    said = [r for r in layout.reasons if r.startswith(SINGLE_BOOT_NOTE)]
    assert said == [f"{SINGLE_BOOT_NOTE}: the boot-to-boot noise is not in these intervals "
                    "(each point's rounds come from one boot of its layout; a rerun that boots "
                    "again measures it, or state [compare] boot_noise_pct)."]
    assert said[0] in paragraph(layout)  # the terminal's Answers block shows it
    assert said[0] in layout.as_dict()["reasons"]  # answers.json


def test_the_historys_boot_to_boot_variance_is_a_source(tmp_path: Path) -> None:
    """A 3 % gap on tight rounds, each layout booted once: without a source it is decided
    only within one boot (its near end is under the 5 % bound); with the boot-to-boot variance
    the history's earlier runs measured (run.json boot_history, stored at the close) it is
    plain decided when that variance is small, and inconclusive when it could reverse the gap;
    the answer names the source either way."""
    values = {PP8: [(1030.0, "b8"), (1031.0, "b8"), (1029.0, "b8")],
              PP4: [(1000.0, "b4"), (1001.0, "b4"), (999.0, "b4")]}
    alone = _answer(tmp_path, "alone", values)
    assert alone.status == DECIDED_ONE_BOOT

    def history(sigma_pct: float) -> dict[str, Any]:
        return {"boot_history": {"input_tps": {"var": offset_var(sigma_pct), "df": 12.0,
                                               "configurations": 3, "runs": 5}}}

    quiet = _answer(tmp_path, "quiet", values, **history(0.3))
    assert quiet.status == DECIDED and quiet.answer == PP8
    said = " ".join(quiet.reasons)
    assert ("the boot-to-boot σ 0.30 % of the history's earlier runs on this cluster, image and "
            "engine (3 configurations booted once in each of 5 runs, 12 degrees of freedom)"
            ) in said, said
    loud = _answer(tmp_path, "loud", values, **history(3.0))
    assert loud.status == INCONCLUSIVE, loud.reasons
    # this run's own repeated boots take precedence over the history
    own = _answer(tmp_path, "own", {
        PP8: [(1030.0, "a"), (1031.0, "a"), (1029.0, "a"), (1032.0, "b"), (1031.0, "b"),
              (1033.0, "b")],
        PP4: values[PP4]}, **history(3.0))
    assert "of this run's repeated boots" in " ".join(own.reasons), own.reasons
    # a malformed entry is no source
    bad = _answer(tmp_path, "bad", values, boot_history={"input_tps": {"var": "x"}})
    assert bad.status == DECIDED_ONE_BOOT


def test_two_boots_carry_the_second_level_and_plan_the_rerun(tmp_path: Path) -> None:
    """PP8 booted twice, its boots 3 % apart: its side takes the boot as the unit, the answer
    states both components, the 2.5 % gap is no longer decided, and the rerun names the boots
    and rounds that 90 % power needs."""
    pp8 = [(1020.0, "boot-a"), (1021.0, "boot-a"), (1019.0, "boot-a"),
           (1050.0, "boot-b"), (1051.0, "boot-b"), (1049.0, "boot-b")]
    pp4 = [(1000.0, "boot-4"), (1001.0, "boot-4"), (999.0, "boot-4"),
           (1000.5, "boot-4"), (999.5, "boot-4"), (1000.0, "boot-4")]
    pooled = interval([v for v, _ in pp8], [v for v, _ in pp4])
    assert pooled is not None and pooled.p_value < 0.01  # as one level: "decided"
    layout = _answer(tmp_path, "two", {PP8: pp8, PP4: pp4})
    assert layout.extra["boots"] == {PP4: 1, PP8: 2}
    lv = layout.extra["levels"][PP8]
    assert lv["boots"] == 2 and lv["within_pct"] == pytest.approx(0.098, abs=0.01)
    assert lv["between_pct"] == pytest.approx(2.1, abs=0.2)
    ev = next(e for e in layout.evidence if {e.point, e.versus} == {PP4, PP8})
    assert ev.noise_pct > 5 * pooled.half_width_pct
    assert layout.status == INCONCLUSIVE
    text = " ".join(layout.reasons)
    assert f"{TWO_LEVEL_NOTE}: {PP8} 2 boots (σ within a boot " in text
    # PP4's single boot takes the run's own between-boot variance (PP8's), named as the source
    assert ("Single-boot sides take the boot-to-boot σ 2.07 %" in text
            and "of this run's repeated boots (1 point, 1 degree of freedom)" in text), text
    plan = layout.extra["rerun_plan"]
    assert plan["boots"] >= 2 and plan["rounds"] >= 1
    rounds_word = "round" if plan["rounds"] == 1 else "rounds"
    assert (f"To separate them ({plan['boots']} boots × {plan['rounds']} {rounds_word} each "
            f"of {PP8}, {PP4} give 90 % power for a ") in text
    # the plan runs as one command: its boots and its rounds per boot
    assert layout.rerun and (f"--ppsweep-repeats {plan['rounds']} --ppsweep-boots "
                             f"{plan['boots']} --ppsweep-reuse") in layout.rerun
    shown = paragraph(layout)
    assert f"{TWO_LEVEL_NOTE}: {PP8} 2 boots" in shown and f"Rerun: {layout.rerun}" in shown
    # the terminal wraps the paragraph to its width but keeps the command whole on its own
    # line, to be copied (a path or flag is never split across lines)
    block = answerview.terminal_lines([layout], width=60)
    assert f"      Rerun: {layout.rerun}" in block
    assert all(len(line) <= 60 for line in block if "Rerun:" not in line)


def test_slo_answers_say_their_level() -> None:
    """The SLO answers judge each layout's probes as one level: they say so (answers.json and the
    terminal's paragraph)."""
    from pytest_ppsweep.results.answers import ONE_LEVEL_NOTE
    from pytest_ppsweep.results.sloanswer import LEVEL_TEXT, _gpu_answer, _load_answer

    def entry(layout: str, low: float, high: float, tps: float) -> dict[str, Any]:
        return {"layout": layout, "low": low, "high": high, "confirmed": True,
                "search": f"{low}-{high} req/s", "tps_per_gpu": tps,
                "tps_per_gpu_rounds": [tps, tps * 1.001, tps * 0.999],
                "usd_per_m_tokens": None}

    entries = [entry(PP8, 0.8, 0.9, 300.0), entry(PP4, 0.4, 0.5, 200.0)]
    for answer in (_load_answer("", "TTFT p50 ≤ 5 s", entries, []),
                   _gpu_answer("", "TTFT p50 ≤ 5 s", entries, "tok/s per GPU")):
        assert answer.status == DECIDED and answer.answer == PP8
        assert LEVEL_TEXT in answer.reasons and LEVEL_TEXT.startswith(ONE_LEVEL_NOTE)
        assert LEVEL_TEXT in paragraph(answer)
