"""The report's History section (report/trendview.py) in a real browser: one chart per point
across the sweep's runs in the history, this run marked, the intervals drawn, hostile image
names shown as text."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext
from support.browser import SCRIPT_LINE, open_report, svg_sizes
from support.runs import seed_run

from pytest_ppsweep.gate.history import History
from pytest_ppsweep.report.html import build_report
from pytest_ppsweep.report.trendview import MAX_CHARTS


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reports = tmp_path_factory.mktemp("history") / "reports"
    seed_run(reports / "kimi-20261201-090000", sweep="kimi3-pp", image="reg/sglang:v1")
    seed_run(reports / "kimi-20261202-090000", sweep="kimi3-pp", image=SCRIPT_LINE)
    last = seed_run(reports / "kimi-20261203-090000", sweep="kimi3-pp", image="reg/sglang:v3")
    History(reports).sync()
    return build_report(last)


def test_each_point_is_charted_across_images(context: BrowserContext, report: Path) -> None:
    page, log = open_report(context, report)
    assert page.locator("h3", has_text="History").count() == 1
    charts = page.locator(".ppsweep-history svg.ppsweep-trend")
    assert charts.count() == MAX_CHARTS  # 5 layouts x 2 Cs: the first eight, the rest named
    assert "2 more point(s) not drawn" in page.locator(".ppsweep").inner_text()
    first = charts.first
    assert first.get_attribute("data-point") == "pp1-tp32-ep4-c8"
    assert first.locator("circle.run").count() == 3
    assert first.locator("circle.current").count() == 1
    assert first.locator("circle.current").get_attribute("data-image") == "reg/sglang:v3"
    assert first.locator("line.interval").count() == 3
    labels = first.locator("text").all_text_contents()
    assert "v1" in labels and "v3" in labels
    for width, height, shapes in svg_sizes(page, ".ppsweep-history"):
        assert width > 300 and height > 100 and shapes >= 7
    # the hostile image name is text (the point's tooltip), never an element that runs
    assert page.evaluate("typeof window.__pwned") == "undefined", "a hostile image name ran"
    assert page.locator(".ppsweep-history script").count() == 0
    tips = first.locator("circle.run title").all_text_contents()
    assert any(SCRIPT_LINE in tip for tip in tips), tips
    assert not log.problems(), log.problems()
