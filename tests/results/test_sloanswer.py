"""The SLO question's answers (results/sloanswer.py) from run folders written as the search
writes them (run/slo_search.py's outcome and probe columns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.slo import searched as layout

from pytest_ppsweep.report.answerview import title
from pytest_ppsweep.results.answers import read_answers, write_answers
from pytest_ppsweep.results.finders import finders
from pytest_ppsweep.results.sloanswer import answers_of, over_text, slo_answers, write_if_absent


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
