"""The SLO question's answers and the gate's SLO check (gate/sloanswer.py) from run folders
written as the search writes them (slorun.py's outcome and probe columns)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pytest_ppsweep.gate.sloanswer import slo_answers, slo_regressions, write_answers
from pytest_ppsweep.slorun import PROBE_COLUMNS, outcome_path

SLO = "TTFT p50 ≤ 5 s"


def layout(run: Path, cid: str, low: float | None, high: float | None, *,
           tps: tuple[float, ...] = (1000.0, 1010.0, 990.0), gpus: int = 32,
           confirmed: bool = True, reason: str = "") -> None:
    """One searched layout: its outcome and its probes (the final load's repeats at ``low``,
    one probe outside at ``high``)."""
    text = (f"≥ {low} req/s and < {high} req/s" if low is not None and high is not None
            else f"≥ {low} req/s (the maximum searched)" if low is not None else "< 0.5 req/s")
    out = {"config_id": cid, "gpus": gpus, "workload": "default", "slo": SLO, "unit": "req/s",
           "low": low, "high": high, "confirmed": confirmed, "text": text,
           "status": "bracketed" if high and low else "at least max" if low else "below min"}
    (run / "slo").mkdir(parents=True, exist_ok=True)
    (run / outcome_path(cid)).write_text(json.dumps(out), encoding="utf-8")
    rows: list[dict[str, Any]] = []
    if low is not None:
        rows += [{"load": low, "within": True, "input_tps_per_gpu": v, "goodput_rps": v / 1000,
                  "usd_per_m_input": 2.0 * gpus / 3600 / (v * gpus) * 1e6} for v in tps]
    if high is not None and low is not None:
        rows.append({"load": high, "within": False, "reasons": "TTFT p50 ≤ 5 s: measured 6 s"})
    if low is None:
        rows.append({"load": 0.5, "within": False, "reasons": reason})
    path = run / "slo_probes.csv"
    new = not path.exists()
    with path.open("a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=PROBE_COLUMNS)
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({"config_id": cid, "search": "rate", "gpus": gpus, **row})


def by_objective(run: Path) -> dict[str, dict[str, Any]]:
    return {a["objective"].split()[1]: a for a in slo_answers(run)}


def test_separate_brackets_decide_the_most_load(tmp_path: Path) -> None:
    layout(tmp_path, "pp4", 2.4, 2.6, tps=(3000.0, 3010.0, 2990.0))
    layout(tmp_path, "pp8", 1.2, 1.4)
    load, gpu = by_objective(tmp_path)["highest"], by_objective(tmp_path)["most"]
    assert (load["kind"], load["status"], load["answer"], load["fallback"]) == (
        "slo", "decided", "pp4", "pp8")
    assert load["ranking"] == ["pp4", "pp8"] and "≥ 2.4 req/s and < 2.6 req/s" in load["text"]
    assert gpu["status"] == "decided" and gpu["evidence"][0]["verdict"] == "beyond noise"
    assert "$0.185 per million tokens" in load["text"]  # 2 $/GPU-h at 3,000 tok/s per GPU


def test_overlapping_brackets_or_per_gpu_within_noise_are_inconclusive(tmp_path: Path) -> None:
    layout(tmp_path, "pp4", 2.4, 3.0, tps=(1000.0, 1030.0, 970.0))
    layout(tmp_path, "pp8", 2.2, 2.8, tps=(1005.0, 1035.0, 975.0))
    answers = by_objective(tmp_path)
    assert answers["highest"]["status"] == "inconclusive"
    assert "overlaps" in answers["highest"]["text"] and answers["highest"]["rerun"]
    assert answers["most"]["status"] == "inconclusive"
    assert answers["most"]["evidence"][0]["verdict"] == "within noise"


def test_no_layout_meets_the_slo_says_how_far_the_closest_is(tmp_path: Path) -> None:
    layout(tmp_path, "pp1", None, 0.5, reason="TTFT p50 ≤ 5 s: measured 6.59 s")
    layout(tmp_path, "pp8", None, 0.5, reason="TTFT p50 ≤ 5 s: measured 7.7 s")
    load = by_objective(tmp_path)["highest"]
    assert load["status"] == "no layout meets the SLO" and load["answer"] is None
    assert "closest: pp1 at 0.5 req/s: TTFT p50 ≤ 5 s: measured 6.59 s (+32% over" in load["text"]


def test_answers_json_keeps_other_kinds(tmp_path: Path) -> None:
    (tmp_path / "answers.json").write_text(json.dumps({"answers": [{"kind": "layout"}]}))
    layout(tmp_path, "pp4", 2.4, 2.6)
    write_answers(tmp_path, slo_answers(tmp_path))
    kinds = [a["kind"] for a in json.loads((tmp_path / "answers.json").read_text())["answers"]]
    assert kinds == ["layout", "slo", "slo"]


def test_the_gate_fails_a_sustainable_load_that_fell_beyond_noise(tmp_path: Path) -> None:
    ref, same, worse, gone = (tmp_path / n for n in ("ref", "same", "worse", "gone"))
    layout(ref, "pp4", 2.4, 2.6)
    layout(same, "pp4", 2.2, 2.4)  # adjacent brackets: at most a 0 % drop, within noise
    layout(worse, "pp4", 1.6, 1.8)  # wholly below, by ≥ 25 %
    layout(gone, "pp4", None, 0.5, reason="TTFT p50 ≤ 5 s: measured 9 s")
    assert slo_regressions(same, ref) == []
    bad = slo_regressions(worse, ref)
    assert len(bad) == 1
    assert "pp4: highest load within TTFT p50 ≤ 5 s fell at least 25.0 %" in bad[0]
    assert "no load within" in slo_regressions(gone, ref)[0]
    assert slo_regressions(worse, ref, "pp8") == []
