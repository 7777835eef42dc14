"""The report's headline box in real Chromium (issue 39, points 2 and 4): with an SLO it is the
SLO's answer, in the colour of "not met" when no layout meets it (never a green "Use 8 / 4 /
4"), with how close each layout came; there is no "Pareto front within the SLO" when no point is
within it; the two SLO questions have two titles; no figure reads "+0 %". Without a decision,
the box names the answer's real status (measured, running), and it always carries the run's
status. Screenshots go to tmp."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page
from support.browser import SCREEN_HEIGHT, open_report, overflow_problems, top_of
from support.runs import SEED_LAYOUTS, config_row, rounds, seed_points, seed_run, write_run

from pytest_ppsweep.report.html import build_report
from pytest_ppsweep.run.slo_search import PROBE_COLUMNS, outcome_path

IDS = list(SEED_LAYOUTS)
RED, GREEN, AMBER = "rgb(187, 0, 0)", "rgb(34, 170, 102)", "rgb(204, 136, 0)"
# Every layout outside TTFT p50 ≤ 5 s at the lowest rate searched; PP2 by 0.02 s only.
MISSED = {IDS[0]: 10.15, IDS[1]: 5.02, IDS[2]: 12.46, IDS[3]: 11.06, IDS[4]: 17.78}


def _slo_run(run: Path, limit_s: float, probes: list[dict[str, Any]],
             outcomes: list[dict[str, Any]], **meta: Any) -> Path:
    slo = {"limits": [{"metric": "ttft", "percentile": 50, "limit_s": limit_s}]}
    seed_run(run, workload={"output_len": 1, "input_len": 16384, "slo": slo}, **meta)
    with (run / "slo_probes.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=PROBE_COLUMNS)
        writer.writeheader()
        for row in probes:
            writer.writerow({"gpus": 32, "search": "rate", "workload": "default", **row})
    (run / "slo").mkdir()
    for out in outcomes:
        (run / outcome_path(out["config_id"])).write_text(json.dumps(
            {"gpus": 32, "workload": "default", "slo": f"TTFT p50 ≤ {limit_s:g} s",
             "unit": "req/s", **out}), encoding="utf-8")
    return build_report(run)


def _open(browser: Browser, report: Path, shot: Path, width: int = 1280) -> Page:
    context = browser.new_context(viewport={"width": width, "height": SCREEN_HEIGHT})
    page, log = open_report(context, report)
    page.screenshot(path=str(shot), full_page=True)
    assert not log.problems(), log.problems()
    assert not overflow_problems(page), overflow_problems(page)
    return page


def _border(box: Locator) -> str:
    return str(box.evaluate("e => getComputedStyle(e).borderTopColor"))


@pytest.mark.parametrize("width", [1280, 800])
def test_no_layout_meets_the_slo_leads_in_the_not_met_colour(browser: Browser, tmp_path: Path,
                                                              width: int) -> None:
    probes = [{"config_id": cid, "load": 0.05, "within": False, "ttft_p50_s": ttft,
               "reasons": f"TTFT p50 ≤ 5 s: measured {ttft:.3g} s", "input_tps": 800.0,
               "input_tps_per_gpu": 25.0} for cid, ttft in MISSED.items()]
    outcomes = [{"config_id": cid, "low": None, "high": 0.05, "confirmed": False,
                 "status": "below min", "text": "< 0.05 req/s (none within the SLO)"}
                for cid in MISSED]
    report = _slo_run(tmp_path / "kimi3-slo-20261204-100000", 5.0, probes, outcomes,
                      run_status="complete",
                      run_status_detail={"measured": IDS, "missing": [], "resume": None})
    page = _open(browser, report, tmp_path / f"slo-not-met-{width}.png", width)
    box = page.locator(".ppsweep-decision").first
    assert box.get_attribute("data-kind") == "slo"
    assert box.get_attribute("data-status") == "no layout meets the SLO"
    assert box.locator(".use").inner_text() == "Not met: no layout meets TTFT p50 ≤ 5 s"
    assert _border(box) == RED  # the colour of "not met", not the decision's green
    assert "Use " not in box.inner_text() and "8 / 4 / 4" not in box.locator(".use").inner_text()
    assert top_of(page, ".ppsweep-decision") < SCREEN_HEIGHT
    # how close each layout came, closest first, never "+0 %"
    rows = [[c.strip() for c in r.locator("td").all_inner_texts()]
            for r in box.locator("table.closest tbody tr").all()]
    assert rows[0] == [IDS[1], "0.05 req/s", "TTFT p50 ≤ 5 s", "5.02 s",
                       "0.02 s (+0.4 %) over the limit"], rows
    assert [r[0] for r in rows] == [IDS[1], IDS[0], IDS[3], IDS[2], IDS[4]]
    assert box.locator(".runstatus").inner_text() == (
        "Run status: COMPLETE, 5 of 5 layouts measured")
    text = page.locator("body").inner_text()
    assert "+0 %" not in text and "+0%" not in text
    # the layout question comes after the SLO's, the two SLO questions have their own titles
    titles = page.locator(".ppsweep-answer p b").all_inner_texts()
    assert titles[0] == "slo: most tok/s per GPU (default)" and titles[1] == "layout", titles
    # no front "within the SLO" when no point is within it: the closest points instead
    headings = page.locator("h3, h4").all_inner_texts()
    assert "Pareto front within the SLO" not in headings, headings
    assert "No point within TTFT p50 ≤ 5 s: the closest points" in headings, headings
    closest = page.locator("table.ppsweep-closest tbody tr").first.locator("td")
    assert closest.all_inner_texts()[-1] == "0.02 s (+0.4 %) over the limit"


def test_an_slo_that_is_met_leads_in_green(browser: Browser, tmp_path: Path) -> None:
    probes = [{"config_id": cid, "load": load, "within": within, "ttft_p50_s": ttft,
               "input_tps": tps, "input_tps_per_gpu": tps / 32,
               "reasons": "" if within else f"TTFT p50 ≤ 30 s: measured {ttft:g} s"}
              for cid, load, ttft, tps, within in (
                  (IDS[3], 0.45, 24.0, 7300.0, True), (IDS[3], 0.45, 25.0, 7250.0, True),
                  (IDS[3], 0.45, 24.5, 7280.0, True), (IDS[3], 0.6, 41.0, 8700.0, False),
                  (IDS[2], 0.3, 12.0, 4800.0, True), (IDS[2], 0.45, 33.0, 6900.0, False))]
    outcomes = [{"config_id": IDS[3], "low": 0.45, "high": 0.6, "confirmed": True,
                 "status": "bracketed", "text": "≥ 0.45 req/s and < 0.6 req/s"},
                {"config_id": IDS[2], "low": 0.3, "high": 0.45, "confirmed": True,
                 "status": "bracketed", "text": "≥ 0.3 req/s and < 0.45 req/s"}]
    report = _slo_run(tmp_path / "kimi3-slo-20261204-110000", 30.0, probes, outcomes)
    page = _open(browser, report, tmp_path / "slo-met.png")
    box = page.locator(".ppsweep-decision").first
    assert box.get_attribute("data-kind") == "slo" and box.get_attribute("data-status") == (
        "decided")
    assert box.locator(".use").inner_text() == f"Within TTFT p50 ≤ 30 s: use {IDS[3]}"
    assert _border(box) == GREEN
    assert "Pareto front within the SLO" in page.locator("h3").all_inner_texts()


def test_a_single_measured_point_says_measured_not_inconclusive(browser: Browser,
                                                                tmp_path: Path) -> None:
    point = next(p for p in seed_points() if p.config_id == IDS[3])
    spec = SEED_LAYOUTS[IDS[3]]
    run = write_run(tmp_path / "one", list(rounds(point)), [config_row(IDS[3], *spec[:3], 0,
                                                                        spec[3])],
                    run_status="complete",
                    run_status_detail={"measured": [IDS[3]], "missing": [], "resume": None})
    page = _open(browser, build_report(run), tmp_path / "measured.png")
    box = page.locator(".ppsweep-decision").first
    assert box.get_attribute("data-status") == "measured"
    assert box.locator(".use").inner_text() == f"Measured, not compared: {IDS[3]}"
    assert "inconclusive" not in box.inner_text()
    assert _border(box) == AMBER
    assert box.locator(".runstatus").get_attribute("data-run-status") == "complete"


def test_a_running_run_says_so_in_the_box(browser: Browser, tmp_path: Path) -> None:
    done = [p for p in seed_points() if p.config_id in IDS[:2]]
    configs = [config_row(cid, *SEED_LAYOUTS[cid][:3], i, SEED_LAYOUTS[cid][3])
               for i, cid in enumerate(IDS[:2])]
    run = write_run(tmp_path / "live", [r for p in done for r in rounds(p)], configs,
                    order=IDS, run_status="running",
                    owner={"host": "elsewhere", "pid": 1, "resume": "pytest x"})
    page = _open(browser, build_report(run), tmp_path / "running.png")
    box = page.locator(".ppsweep-decision").first
    assert box.get_attribute("data-status") == "running"
    assert box.locator(".use").inner_text() == "Running: nothing decided yet"
    status = box.locator(".runstatus")
    assert status.get_attribute("data-run-status") == "running"
    assert status.inner_text().startswith(
        f"Run status: RUNNING, 2 of 5 layouts measured\npending: {', '.join(IDS[2:])}")
    assert "INVALID" not in page.locator("body").inner_text()
