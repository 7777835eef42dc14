"""The SLO question's answers (results/sloanswer.py) from run folders written as the search
writes them (run/slo_search.py's outcome and probe columns)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

from support.slo import SLO, fitted, share_at
from support.slo import searched as layout

from pytest_ppsweep.folder.runfolder import RunFolder
from pytest_ppsweep.report.answerview import title
from pytest_ppsweep.results.answers import DECIDED, read_answers, write_answers
from pytest_ppsweep.results.finders import finders
from pytest_ppsweep.results.sloanswer import (
    _load_answer,
    answers_of,
    over_text,
    read_probes,
    slo_answers,
    write_if_absent,
)
from pytest_ppsweep.results.slocapacity import of_probes, over_cell
from pytest_ppsweep.stats.capacity import Capacity, ratio_interval


def by_objective(run: Path) -> dict[str, dict[str, Any]]:
    """The two answers as answers.json holds them, by "load" / "gpu"."""
    answers = [a.as_dict() for a in answers_of(run)]
    return {"load" if a["objective"] == ["sustainable load"] else "gpu": a for a in answers}


def test_separate_brackets_decide_the_most_load(tmp_path: Path) -> None:
    layout(tmp_path, "pp4", 2.4, 2.6, tps=(3000.0, 3010.0, 2990.0))
    layout(tmp_path, "pp8", 1.2, 1.4)
    load, gpu = by_objective(tmp_path)["load"], by_objective(tmp_path)["gpu"]
    assert (load["kind"], load["status"], load["answer"], load["fallback"]) == (
        "slo", "decided", "pp4", "pp8")
    assert load["ranking"] == ["pp4", "pp8"] and "≥ 2.4 req/s and < 2.6 req/s" in load["text"]
    assert gpu["status"] == "decided" and gpu["evidence"][0]["verdict"] == "better"
    assert "$0.185 per million tokens" in load["text"]  # 2 $/GPU-h at 3,000 tok/s per GPU
    assert load["evidence"][0]["verdict"] == "better"
    assert gpu["objective"] == ["input_tps_per_gpu"]
    # a run folder written before the capacity estimate: the bracket rule, and it says so
    assert load["rule"] == "bracket" and ("Decided on the brackets, as this run folder's "
                                          "outcomes carry no capacity interval") in load["text"]


def test_overlapping_brackets_or_per_gpu_within_noise_are_inconclusive(tmp_path: Path) -> None:
    layout(tmp_path, "pp4", 2.4, 3.0, tps=(1000.0, 1030.0, 970.0))
    layout(tmp_path, "pp8", 2.2, 2.8, tps=(1005.0, 1035.0, 975.0))
    answers = by_objective(tmp_path)
    assert answers["load"]["status"] == "inconclusive"
    assert "overlaps" in answers["load"]["text"] and answers["load"]["rerun"]
    assert answers["gpu"]["status"] == "inconclusive"
    assert answers["gpu"]["evidence"][0]["verdict"] == "within noise"


def test_no_layout_meets_the_slo_says_how_far_the_closest_is(tmp_path: Path) -> None:
    layout(tmp_path, "pp1", None, 0.5, reason="TTFT p50 ≤ 5 s: measured 6.59 s")
    layout(tmp_path, "pp8", None, 0.5, reason="TTFT p50 ≤ 5 s: measured 7.7 s")
    load = by_objective(tmp_path)["load"]
    assert load["status"] == "no layout meets the SLO" and load["answer"] is None
    assert ("closest: pp1 at 0.5 req/s: TTFT p50 ≤ 5 s: measured 6.59 s, 1.6 s (+32 %) over "
            "the limit") in load["text"]
    # each layout's distance, closest first, for the report's box and its "closest" section
    assert [(d["layout"], d["measured_s"], d["limit_s"]) for d in load["closest"]] == [
        ("pp1", 6.59, 5.0), ("pp8", 7.7, 5.0)]


def test_a_value_just_over_the_limit_never_reads_plus_zero_percent(tmp_path: Path) -> None:
    # measure/withinslo.py's words, whose own "; " must not split the reason
    layout(tmp_path, "pp2", None, 0.5, reason=(
        "TTFT p50 ≤ 5 s: measured 5.02 s (40 of 40 requests over 5 s; the share over it is "
        "0.93-1.00 at 95% confidence, 0.50 allowed)"))
    load = by_objective(tmp_path)["load"]
    assert "measured 5.02 s, 0.02 s (+0.4 %) over the limit" in load["text"], load["text"]
    assert "+0 %" not in load["text"] and "+0%" not in load["text"]
    # the probe's own column, where slo_probes.csv has it, beats the reason's 3 digits
    assert over_text(5.004, 5.0) == "0.004 s (+0.08 %) over the limit"
    assert over_text(10.146, 5.0) == "5.1 s (+103 %) over the limit"


def test_the_two_slo_questions_have_two_titles(tmp_path: Path) -> None:
    layout(tmp_path, "pp4", 2.4, 2.6)
    titles = [title(a) for a in answers_of(tmp_path)]
    assert titles == ["slo: most load (default)", "slo: most tok/s per GPU (default)"]
    assert len(set(titles)) == 2


def test_the_slo_finder_is_listed_and_answers_json_is_written_once(tmp_path: Path) -> None:
    assert slo_answers in finders()
    layout(tmp_path, "pp4", 2.4, 2.6)
    assert write_if_absent(tmp_path, "run-1") is not None
    assert [a["kind"] for a in read_answers(tmp_path)] == ["slo", "slo"]
    write_answers(tmp_path, "run-1", [])  # the answers of every kind were written first
    assert write_if_absent(tmp_path, "run-1") is None and read_answers(tmp_path) == []


def load_answer(run: Path) -> dict[str, Any]:
    return by_objective(run)["load"]


def test_capacity_intervals_decide_where_the_brackets_overlap(tmp_path: Path) -> None:
    """Capacities 2.0 and 1.5 req/s, 200 judged requests a probe: the intervals separate them at
    95 %, though the searches' brackets overlap (a coarse search). The same probes in a folder
    written before the capacity estimate fall back to the bracket rule: inconclusive."""
    new, old = tmp_path / "new", tmp_path / "old"
    for run, known in ((new, True), (old, False)):
        fitted(run, "pp4", 2.0, bracket=(1.6, 2.5), with_capacity=known)
        fitted(run, "pp8", 1.5, bracket=(1.4, 1.8), with_capacity=known)
    load = load_answer(new)
    assert (load["status"], load["answer"], load["rule"]) == ("decided", "pp4",
                                                               "capacity interval")
    note = load["evidence"][0]["note"]
    # both intervals, the ratio's lower end and the confidence (one rival: 0.95 intervals)
    assert "capacity 2.001 req/s (0.95 interval 1.941-2.062) vs 1.501 req/s (0.95 interval" in note
    assert "with 0.975 confidence (above 1" in note and load["evidence"][0]["low_pct"] > 0
    assert any("capacity intervals at 95% confidence over 1 rival" in r for r in load["reasons"])
    assert ("It carries more than every rival with 95% confidence: pp8 1.5 req/s, ratio 1.333 "
            "(at least 1.2") in load["text"]
    before = load_answer(old)
    assert (before["status"], before["rule"]) == ("inconclusive", "bracket")
    assert "bracket rule (this run folder's outcomes carry no capacity interval" in (
        before["evidence"][0]["note"])


def test_brackets_apart_but_intervals_overlapping_is_inconclusive_with_a_computed_rerun(
        tmp_path: Path) -> None:
    """Capacities 2.0 and 1.9 req/s from probes of 40 requests: the intervals overlap, so the
    load is not decided, although the brackets (2.0-2.2 and 1.8-1.95) are apart and the bracket
    rule decides pp4. The rerun says how much narrower: more refine probes, precision_pct and
    max_refine, computed from the two intervals."""
    new, old = tmp_path / "new", tmp_path / "old"
    for run, known in ((new, True), (old, False)):
        fitted(run, "pp4", 2.0, n=40, bracket=(2.0, 2.2), with_capacity=known)
        fitted(run, "pp8", 1.9, n=40, bracket=(1.8, 1.95), with_capacity=known)
    assert (load_answer(old)["status"], load_answer(old)["answer"]) == ("decided", "pp4")
    load = load_answer(new)
    assert (load["status"], load["answer"], load["fallback"]) == ("inconclusive", None, "pp8")
    assert "pp8's capacity is not below pp4's with 95% confidence (ratio 1.05" in load["text"]
    assert "to show them equivalent" not in rerun_of(load)  # 5 % apart: not within ±1 %
    rerun = load["rerun"]
    factor = float(rerun.split("about ×")[1].split(" ")[0])
    assert factor > 1.5, rerun  # 40 requests a probe are far from enough
    assert "more refine probe(s) of ~40 judged requests on pp4" in rerun
    assert "[workload.slo] precision_pct ≤ " in rerun and "(now 10.0)" in rerun
    assert "max_refine ≥ " in rerun and rerun.endswith("--ppsweep-config pp4,pp8")
    # what it asks for is what separates them: the same truth with ×factor the requests
    more = tmp_path / "more"
    fitted(more, "pp4", 2.0, n=math.ceil(40 * factor * 1.1))
    fitted(more, "pp8", 1.9, n=math.ceil(40 * factor * 1.1))
    assert load_answer(more)["status"] == "decided"


def test_the_comparison_with_more_rivals_keeps_the_stated_error(tmp_path: Path) -> None:
    """Bonferroni over the rivals: a gap that one rival's 0.95 interval of the ratio separates
    is not separated from three rivals of the same capacity (each ratio at 1 − 0.05/3)."""
    rival = 1.8
    rows = [{k: str(v) for k, v in r.items()}
            for r in _rows(tmp_path / "probe", "pp8", rival)]
    one = three = None
    for step in range(1, 60):
        best = rival * (1 + step / 200)
        mine = [{k: str(v) for k, v in r.items()} for r in _rows(tmp_path / f"b{step}", "pp4",
                                                                 best)]
        lows = [ratio_interval(*(of_probes(x, 0.95, interval_at=lv) or _none()
                                 for x in (mine, rows)))[1] for lv in (0.95, 1 - 0.05 / 3)]
        if lows[0] > 1 > lows[1]:
            one = three = best
            break
    assert one is not None and three is not None
    a, b = tmp_path / "one", tmp_path / "three"
    fitted(a, "pp4", one)
    fitted(a, "pp8", rival)
    fitted(b, "pp4", three)
    for cid in ("pp8", "pp8b", "pp8c"):
        fitted(b, cid, rival)
    assert load_answer(a)["status"] == "decided"
    many = load_answer(b)
    assert many["status"] == "inconclusive" and len(many["evidence"]) == 3
    assert all("0.9917 confidence" in e["note"] for e in many["evidence"])
    assert any("over 3 rival(s): each ratio best/rival has a 0.9833 interval" in r
               for r in many["reasons"])


def test_a_layout_without_a_capacity_interval_is_not_decided_on_its_bracket(
        tmp_path: Path) -> None:
    """pp8's probes are too few near its crossing for a fit: the load is inconclusive and says
    why in the search's words, although the brackets are apart (the bracket rule decides)."""
    fitted(tmp_path, "pp4", 3.0)
    fitted(tmp_path, "pp8", 1.0, spread=(0.5, 2.0))
    load = load_answer(tmp_path)
    assert load["status"] == "inconclusive" and load["rule"] == "capacity interval"
    assert ("pp8 has no capacity estimate (too few probes near the crossing to fit it): not "
            "compared on capacity") in load["text"]
    assert "max_refine" in load["rerun"]
    old = tmp_path / "old"
    fitted(old, "pp4", 3.0, with_capacity=False)
    fitted(old, "pp8", 1.0, spread=(0.5, 2.0), with_capacity=False)
    assert load_answer(old)["status"] == "decided"


def rerun_of(answer: dict[str, Any]) -> str:
    return str(answer["rerun"])


def test_two_layouts_whose_ratio_interval_lies_inside_the_margin_are_equivalent(
        tmp_path: Path) -> None:
    """Capacities 2.004 and 2.0 req/s: with 20,000 judged requests a probe the ratio's 95 %
    interval (0.998-1.006) lies inside ±1 % ([compare] min_effect_pct): equivalent, the pick left
    to tokens/s per GPU. With 5,000 it does not: inconclusive, and the rerun says how many more
    requests show them equivalent. A margin of 0.1 % (run.json) is narrower than the gap: no
    equivalence is offered. Three such layouts are never `equivalent` (module docstring)."""
    wide, narrow, strict, three = (tmp_path / n for n in ("wide", "narrow", "strict", "three"))
    for run, n in ((wide, 5000), (narrow, 20000), (strict, 20000), (three, 20000)):
        fitted(run, "pp4", 2.004, n=n)
        fitted(run, "pp8", 2.0, n=n, tps=1100.0)
    fitted(three, "pp2", 2.002, n=20000)
    same = load_answer(narrow)
    assert (same["status"], same["answer"], same["equivalent"]) == (
        "equivalent", None, ["pp4", "pp8"])
    assert same["text"].startswith("Equivalent: pp4 and pp8 carry the same load within ±1 % with "
                                   "95% confidence (ratio 1.002, 0.95 interval 0.99")
    assert "pick by tokens/s per GPU or cost (pp8 (1,100 tok/s per GPU))" in same["text"]
    assert same["evidence"][0]["verdict"] == "equivalent"
    apart = load_answer(wide)
    assert apart["status"] == "inconclusive"
    assert "to show them equivalent within ±1 % instead: about ×1.1 the judged" in rerun_of(apart)
    RunFolder(strict).run_json.parent.mkdir(parents=True, exist_ok=True)
    RunFolder(strict).run_json.write_text(json.dumps({"compare": {"min_effect_pct": 0.1}}))
    tight = load_answer(strict)
    assert tight["status"] == "inconclusive" and "equivalent" not in rerun_of(tight)
    assert load_answer(three)["status"] == "inconclusive"


def _none() -> Capacity:
    raise AssertionError("the probes place no capacity")


def _rows(run: Path, cid: str, capacity: float, n: int = 200) -> list[dict[str, Any]]:
    run.mkdir(parents=True, exist_ok=True)
    fitted(run, cid, capacity, n=n)
    return read_probes(run)


def test_identical_layouts_are_decided_at_most_at_the_stated_rate() -> None:
    """A/A: two and three layouts of one true capacity, each probe's share over the limit drawn
    binomially (200 requests, ten loads from 0.85 to 1.3 × the crossing), 300 draws each: a best
    is named at most 5 % of the time (+3 standard errors of 300 draws), whichever the ranking
    put first; and a true gap of 5 % is decided in most draws (the rule is not safe by being
    blind)."""
    rng = random.Random(11)

    def layout_of(cid: str, capacity: float) -> tuple[dict[str, Any], list[dict[str, str]]]:
        loads = [round(2.0 * (0.85 + 0.05 * i), 4) for i in range(10)]
        rows = [{"config_id": cid, "probe": str(i + 1), "load": str(x), "workload": "default",
                 "over_limit": over_cell({"ttft_p50_s": (
                     sum(rng.random() < share_at(x, capacity) for _ in range(200)), 200)})}
                for i, x in enumerate(loads)]
        entry = {"layout": cid, "low": 1.6, "high": 2.5, "confirmed": True, "search": "",
                 "unit": "req/s", "tps_per_gpu": None, "usd_per_m_tokens": None,
                 "capacity": {"confidence": 0.95}, "interval_known": True,
                 "precision_pct": 10.0, "max_refine": 16}
        return entry, rows

    def decided(truths: dict[str, float]) -> bool:
        drawn = [layout_of(cid, c) for cid, c in truths.items()]
        probes = [r for _, rows in drawn for r in rows]
        return _load_answer("default", SLO, [e for e, _ in drawn], probes).status == DECIDED

    draws = 300
    for layouts in (2, 3):
        false = sum(decided({f"l{i}": 2.0 for i in range(layouts)}) for _ in range(draws))
        assert false / draws <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / draws), (layouts, false)
    power = sum(decided({"a": 2.1, "b": 2.0}) for _ in range(100))
    assert power >= 80, power


def test_a_layout_whose_outputs_disagree_carries_no_load(tmp_path: Path) -> None:
    """PP4 carries the most load within the SLO, but its outputs disagree with the reference
    layout PP8's: it is excluded from both SLO answers with the reason, as a failed boot is;
    with every layout excluded, nothing is recommended."""
    from pytest_ppsweep.results.outputs import LayoutOutputs, PromptOutput

    def outputs(cid: str, ids: tuple[int, ...]) -> None:
        top = tuple(((t, -0.1), (t + 100, -3.0)) for t in ids)
        LayoutOutputs(cid, (PromptOutput("p", ids, (-0.1,) * len(ids), top),), 0.1,
                      0.2).write(tmp_path)

    layout(tmp_path, "pp4", 2.4, 2.6, tps=(3000.0, 3010.0, 2990.0))
    layout(tmp_path, "pp8", 1.2, 1.4)
    (tmp_path / "metadata").mkdir(exist_ok=True)
    meta = tmp_path / "metadata" / "run.json"
    meta.write_text(json.dumps({"baseline": "pp8", "order": ["pp4", "pp8"]}))
    outputs("pp8", (1, 2, 3))
    outputs("pp4", (7, 8, 9))
    found = by_objective(tmp_path)
    for answer in found.values():
        assert "pp4" not in answer["ranking"], answer
        (why,) = [e["why"] for e in answer["excluded"] if e["point"] == "pp4"]
        assert why.startswith("wrong outputs (vs pp8, this run's reference layout)"), why
    assert found["load"]["answer"] in (None, "pp8")
    # with pp4 the reference, pp8 is the one that disagrees: pp4 is the answer, pp8 excluded
    meta.write_text(json.dumps({"baseline": "pp4", "order": ["pp4", "pp8"]}))
    load = by_objective(tmp_path)["load"]
    assert load["answer"] == "pp4" and [e["point"] for e in load["excluded"]] == ["pp8"]
