"""The report's first screen answers the question, at 1400 and 800 px wide, in real Chromium:
which layout, by how much vs the baseline and the runner-up, whether it can be trusted, and the
fallback; nothing makes the page scroll sideways. Screenshots go to the test's tmp dir.

(pytest-html's own page of a sweep run is checked the same way in test_pytest_html_report.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page
from support.browser import (
    SCREEN_HEIGHT,
    SCREEN_WIDTHS,
    open_report,
    overflow_problems,
    top_of,
)
from support.runs import SEED_LAYOUTS, config_row, rounds, seed_points, seed_run, write_run

from pytest_ppsweep.report.html import build_report


@pytest.fixture(scope="module")
def seed_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_report(seed_run(tmp_path_factory.mktemp("first") / "kimi3-pp-20261201-093000"))


def _screen(browser: Browser, report: Path, width: int, shot: Path) -> tuple[Page, list[str]]:
    context = browser.new_context(viewport={"width": width, "height": SCREEN_HEIGHT})
    page, log = open_report(context, report)
    page.screenshot(path=str(shot))
    assert not log.problems(), log.problems()
    return page, overflow_problems(page)


@pytest.mark.parametrize("width", SCREEN_WIDTHS)
def test_first_screen_answers_the_question(browser: Browser, seed_report: Path, width: int,
                                           tmp_path: Path) -> None:
    page, overflow = _screen(browser, seed_report, width, tmp_path / f"first-{width}.png")
    assert not overflow, "\n".join(overflow)
    assert top_of(page, ".ppsweep-banner") < SCREEN_HEIGHT
    decision = page.locator(".ppsweep-decision")
    box = decision.bounding_box()
    assert box is not None and box["y"] < SCREEN_HEIGHT
    # The whole answer is on the first screen, not only its first line.
    assert box["y"] + box["height"] <= SCREEN_HEIGHT, box
    assert decision.locator(".use").inner_text() == "Use 8 / 4 / 4 (PP / TP / EP) — pp8-tp4-ep4"
    headers = [h.strip().replace("\n", " ") for h in
               decision.locator("thead th").all_inner_texts()]
    assert headers == ["C", "Input TPS", "vs baseline pp1-tp32-ep4", "vs runner-up pp4-tp8-ep4",
                       "TTFT p50", "vs baseline pp1-tp32-ep4", "vs runner-up pp4-tp8-ep4"]
    rows = [[c.strip() for c in r.locator("td").all_inner_texts()]
            for r in decision.locator("tbody tr").all()]
    assert rows == [["8", "8,809.50", "+170.40 %", "+23.12 %", "13.47 s", "-65.63 %", "-22.05 %"],
                    ["16", "8,824.12", "+170.67 %", "+23.37 %", "27.31 s", "-65.16 %",
                     "-21.61 %"]]
    # Better is green and worse red for either direction of metric.
    assert decision.locator("td .better").count() == 8
    trust = decision.locator(".trust li").all_inner_texts()
    assert trust[0] == ("Verdicts: pp8-tp4-ep4 VALID at every C (2/2); 10/10 points of the run "
                        "valid.")
    assert "Input TPS at most 0.60 % (limit 2.0 %)" in trust[1]
    assert trust[2] == ("Worst-rank GPU memory headroom: 6,244 MiB of 85,651 MiB (7.3 %) on "
                        "node1 / GPU 3.")
    assert decision.locator(".fallback").inner_text() == (
        "Fallback: pp4-tp8-ep4 (4 / 8 / 4), ranked second.")
    # The tables and charts come after the answer.
    assert top_of(page, "xpath=//h3[starts-with(., 'Medians')]") > box["y"] + box["height"]


def test_first_screen_without_a_recommendation(browser: Browser, tmp_path: Path) -> None:
    """Every layout noisy (spread 10 %): no layout is dropped for it, the noise rule cannot
    separate the top layouts, and the first screen says so with the command that would."""
    rows = [r for p in seed_points() for r in rounds(p, jitter=0.05)]
    configs = [config_row(cid, *spec[:3], order, spec[3])
               for order, (cid, spec) in enumerate(SEED_LAYOUTS.items())]
    report = build_report(write_run(tmp_path / "noisy", rows, configs))
    page, overflow = _screen(browser, report, 800, tmp_path / "none-800.png")
    assert not overflow, "\n".join(overflow)
    decision = page.locator(".ppsweep-decision.open")  # amber: more rounds may decide
    assert top_of(page, ".ppsweep-decision.open") < SCREEN_HEIGHT
    assert decision.locator(".use").inner_text() == "No layout decided: inconclusive"
    assert decision.get_attribute("data-status") == "inconclusive"
    assert "(0/10 points valid)" in decision.inner_text()
    rerun = decision.locator(".rerun").inner_text()
    assert "--ppsweep-config pp8-tp4-ep4,pp4-tp8-ep4" in rerun and "--ppsweep-reuse" in rerun
