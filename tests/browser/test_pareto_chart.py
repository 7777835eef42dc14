"""The charts of an SLO run in real Chromium at 800 and 1280 px. The Pareto chart: measured
points, the front, the SLO line and the planner's predictions (with intervals) for layouts not
booted, all inside the chart, which fits the page and keeps its text readable. The searches
chart: each layout's TTFT against the load with the SLO line, no two labels overprinting.
Screenshots go to tmp."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from playwright.sync_api import Browser
from support.browser import SCREEN_HEIGHT, open_report, overflow_problems
from support.runs import seed_run

from pytest_ppsweep.planner.data import load_run_folder
from pytest_ppsweep.planner.fitting import fit
from pytest_ppsweep.report.html import build_report
from pytest_ppsweep.run.slo_search import PROBE_COLUMNS, outcome_path

SLO = {"limits": [{"metric": "ttft", "percentile": 50, "limit_s": 30.0}]}
# (layout, GPUs, load, ttft p50 s, input TPS, within)
PROBES = [("pp8-tp4-ep4", 0.3, 9.0, 4900.0, True), ("pp8-tp4-ep4", 0.45, 24.0, 7300.0, True),
          ("pp8-tp4-ep4", 0.6, 41.0, 8700.0, False), ("pp4-tp8-ep4", 0.3, 12.0, 4800.0, True),
          ("pp4-tp8-ep4", 0.45, 33.0, 6900.0, False)]


@pytest.fixture(scope="module")
def slo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeds' five layouts measured, two of them searched under TTFT p50 ≤ 30 s, and the
    planner fitted on the run (so pp32-tp1, never booted, is predicted)."""
    run = seed_run(tmp_path_factory.mktemp("pareto") / "kimi3-slo-20261201-093000",
                   workload={"output_len": 1, "input_len": 16384, "slo": SLO})
    with (run / "slo_probes.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=PROBE_COLUMNS)
        writer.writeheader()
        for cid, load, ttft, tps, within in PROBES:
            writer.writerow({"config_id": cid, "gpus": 32, "search": "rate", "load": load,
                             "within": within, "ttft_p50_s": ttft, "input_tps": tps,
                             "input_tps_per_gpu": tps / 32, "usd_per_m_input": 1.5})
    (run / "slo").mkdir()
    for cid, low, high in (("pp8-tp4-ep4", 0.45, 0.6), ("pp4-tp8-ep4", 0.3, 0.45)):
        (run / outcome_path(cid)).write_text(json.dumps(
            {"config_id": cid, "gpus": 32, "workload": "default", "slo": "TTFT p50 ≤ 30 s",
             "unit": "req/s", "low": low, "high": high, "confirmed": True, "status": "bracketed",
             "text": f"≥ {low} req/s and < {high} req/s"}), encoding="utf-8")
    fit(load_run_folder(run)).write(run / "planner" / "profile.json")
    return build_report(run)


@pytest.mark.parametrize("width", [800, 1280])
def test_the_pareto_chart_is_readable_and_complete(browser: Browser, slo_report: Path,
                                                   width: int, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": width, "height": SCREEN_HEIGHT})
    page, log = open_report(context, slo_report)
    chart = page.locator("svg.ppsweep-pareto")
    chart.scroll_into_view_if_needed()
    chart.screenshot(path=str(tmp_path / f"pareto-{width}.png"))
    assert not log.problems(), log.problems()
    assert not overflow_problems(page), overflow_problems(page)
    box = chart.bounding_box()
    assert box is not None
    # the chart fills what it is given up to its design width, never below a readable size:
    # its 12 px text drawn at ≥ 10 px
    assert 600 <= box["width"] <= min(width, 720) + 0.5, box
    assert box["width"] / 720 * 12 >= 10
    inside = page.evaluate("""() => { const s = document.querySelector('svg.ppsweep-pareto');
        const r = s.getBoundingClientRect(); const out = [];
        for (const e of s.querySelectorAll('text,circle,rect,line,polyline')) {
          const b = e.getBoundingClientRect();
          if (b.width === 0 && b.height === 0) continue;
          if (b.left < r.left - 1 || b.right > r.right + 1 || b.top < r.top - 1
              || b.bottom > r.bottom + 1) out.push(e.tagName + ' ' + (e.textContent || ''));
        }
        return out; }""")
    assert inside == [], f"drawn outside the chart: {inside}"
    measured = chart.locator("circle.measured")
    assert measured.count() == 10 + 5  # 5 layouts × 2 C, and 5 layout × load probes
    assert chart.locator("circle.on-front").count() >= 2
    assert chart.locator("polyline.front").count() == 1
    assert chart.locator("line.slo-line").count() == 1
    predicted = chart.locator("rect.predicted")
    assert predicted.count() == 2  # pp32-tp1 at C=8 and C=16, never booted
    assert "pp32-tp1" in predicted.first.locator("title").text_content() or ""
    assert "90 % interval" in predicted.first.locator("title").text_content() or ""
    text = page.locator("#ppsweep-slo").locator("xpath=following-sibling::ul[1]").inner_text()
    assert "pp8-tp4-ep4 carries the most load within TTFT p50 ≤ 30 s" in text
    pareto_csv = (slo_report.parent / "pareto.csv").read_text().splitlines()
    assert sum(",predicted," in line for line in pareto_csv) == 2
    context.close()


@pytest.mark.parametrize("width", [800, 1280])
def test_the_searches_chart_shows_each_layout_against_the_slo_line(
        browser: Browser, slo_report: Path, width: int, tmp_path: Path) -> None:
    """The SLO searches charted (report/slocharts.py): TTFT against the load, one line per
    searched layout, the SLO's limit as a line; inside the chart and no two labels overprint."""
    context = browser.new_context(viewport={"width": width, "height": SCREEN_HEIGHT})
    page, log = open_report(context, slo_report)
    chart = page.locator("svg.ppsweep-slo-search")
    assert chart.count() == 1  # the SLO limits one metric (TTFT p50), searched by rate
    chart.scroll_into_view_if_needed()
    chart.screenshot(path=str(tmp_path / f"slo-search-{width}.png"))
    assert not log.problems(), log.problems()
    assert not overflow_problems(page), overflow_problems(page)
    box = chart.bounding_box()
    assert box is not None and 600 <= box["width"] <= min(width, 720) + 0.5, box
    found = page.evaluate("""() => { const s = document.querySelector('svg.ppsweep-slo-search');
        const r = s.getBoundingClientRect(); const out = [], texts = [];
        for (const e of s.querySelectorAll('text,circle,line,polyline')) {
          const b = e.getBoundingClientRect();
          if (b.width === 0 && b.height === 0) continue;
          if (b.left < r.left - 1 || b.right > r.right + 1 || b.top < r.top - 1
              || b.bottom > r.bottom + 1) out.push('outside: ' + e.tagName + ' '
                                                   + (e.textContent || ''));
          if (e.tagName === 'text') texts.push([e.textContent, b]);
        }
        for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
          const [ta, a] = texts[i], [tb, b] = texts[j];
          if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1
              && b.top < a.bottom - 1) out.push('overlap: ' + ta + ' / ' + tb);
        }
        return out; }""")
    assert found == [], found
    slo = chart.locator("line.slo-line")
    assert slo.count() == 1
    assert "SLO: TTFT p50 ≤ 30 s" in (chart.locator("text.slo-label").text_content() or "")
    lines = chart.locator("polyline.p50")
    assert sorted(lines.nth(i).get_attribute("data-layout") or "" for i in range(lines.count())
                  ) == ["pp4-tp8-ep4", "pp8-tp4-ep4"]
    assert chart.locator("circle.probe").count() == len(PROBES)  # one per layout × load
    # the SLO line sits at 30 s: between pp8's 24 s (within) and 41 s (outside) probes
    y = float(slo.get_attribute("y1") or "nan")
    cy = {c.get_attribute("cy") for c in chart.locator("circle.probe").all()}
    assert any(float(v or 0) < y for v in cy) and any(float(v or 0) > y for v in cy)
    context.close()
