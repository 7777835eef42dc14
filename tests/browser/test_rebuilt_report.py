"""The standalone report (``build_report``) in a real browser: tables and charts render, links
resolve, nothing errors, and hostile log lines from the run's files show as text and run nothing."""

from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import BrowserContext
from support.browser import (
    IMG_LINE,
    SCRIPT_LINE,
    assert_inert,
    link_problem,
    links,
    open_report,
    svg_sizes,
    table_after,
)
from support.runs import SEED_LAYOUTS, Point, config_row, rounds, seed_points, write_run

from pytest_ppsweep.report.html import EVIDENCE, build_report

# A layout id that a browser would run if it were pasted as HTML (no "/": it is a folder name).
HOSTILE_ID = f"pp2-tp16-ep2 {IMG_LINE}"
FAILED_BOOT = "pp32-tp1-ep1"
HOSTILE_HREF = quote(HOSTILE_ID, safe="")


def _evidence(run_dir: Path, config_id: str, raw: bool = True) -> None:
    """The per-configuration folders runstore writes (``raw/`` only once a round ran)."""
    service = run_dir / "service" / config_id
    service.mkdir(parents=True)
    (service / "node0.log").write_text(f"ready\n{SCRIPT_LINE}\n", encoding="utf-8")
    (service / "launch.sh").write_text("python3 -m sglang.launch_server\n", encoding="utf-8")
    gpu = run_dir / "gpu" / config_id
    gpu.mkdir(parents=True)
    (gpu / "before.csv").write_text("index, memory.used, memory.total\n0, 0, 85651\n")
    if raw:
        (run_dir / "raw" / config_id).mkdir(parents=True)
        (run_dir / "raw" / config_id / "c8-r1.jsonl").write_text('{"ok": true}\n')


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed's five layouts, one more whose id and log findings are hostile, and one that
    failed to boot with a hostile error; every configuration's evidence is on disk."""
    run_dir = tmp_path_factory.mktemp("browser") / "run-hostile"
    rows = [r for p in seed_points() for r in rounds(p)]
    rows += [r for c in (8, 16) for r in rounds(Point(HOSTILE_ID, 2, 16, 2, c, 4000.0, 30, 32))]
    configs = [config_row(cid, *spec[:3], order, spec[3])
               for order, (cid, spec) in enumerate(SEED_LAYOUTS.items())]
    configs.append(config_row(HOSTILE_ID, 2, 16, 2, 5, 80_000, log_clean=False,
                              log_findings=f"node1.log:7 {IMG_LINE}", mem_worst_node=IMG_LINE))
    configs.append(config_row(FAILED_BOOT, 32, 1, 1, 6, math.nan, boot_ok=False,
                              boot_error=f"node0.log: {SCRIPT_LINE} {IMG_LINE}", boot_s=math.nan,
                              topology_ok="", log_clean="", mem_total_mib=math.nan,
                              mem_headroom_mib=math.nan))
    write_run(run_dir, rows, configs, image=SCRIPT_LINE, cluster=IMG_LINE)
    for row in configs:
        _evidence(run_dir, row["config_id"], raw=row["config_id"] != FAILED_BOOT)
    (run_dir / "metadata" / "ppsweep.toml").write_text("[sweep]\n")
    return build_report(run_dir)


def test_tables_and_recommendation_render(context: BrowserContext, report: Path) -> None:
    page, log = open_report(context, report)
    assert page.locator(".ppsweep-banner").inner_text().startswith("SIMULATED RUN")

    headers, rows = table_after(page, "Medians over repeats")
    assert headers[:6] == ["PP / TP / EP", "Config", "C", "Repeats", "Input TPS", "TTFT p50"]
    assert headers[-1] == "Verdict"
    assert len(rows) == 6 * 2  # six configurations ran at C=8 and C=16
    by_key = {(r[1], r[2]): r for r in rows}
    assert by_key[("pp8-tp4-ep4", "8")][4] == "8,809.50"
    assert by_key[("pp8-tp4-ep4", "8")][9] == "+170.40 %"
    assert by_key[("pp1-tp32-ep4", "8")][9] == "baseline"
    assert by_key[(HOSTILE_ID, "8")][-1].startswith("INVALID")

    headers, rows = table_after(page, "Step-to-step deltas")
    assert headers == ["Change", "C", "Input TPS step", "TTFT p50 step"]
    assert ["pp4-tp8-ep4 -> pp8-tp4-ep4", "8", "+23.12 %"] in [r[:3] for r in rows]

    headers, rows = table_after(page, "GPU memory")
    assert headers[2:5] == ["Worst-rank peak", "GPU total", "Headroom"]
    assert len(rows) == 7
    memory = {r[1]: r for r in rows}
    assert memory["pp8-tp4-ep4"][4] == "6,244 MiB"
    assert memory[HOSTILE_ID][5] == f"{IMG_LINE} / GPU 3"

    verdicts = page.locator("xpath=//h3[starts-with(., 'Verdicts')]/following-sibling::ul[1]/li")
    assert page.locator("h3", has_text="Verdicts").inner_text() == "Verdicts (10/14 valid)"
    assert verdicts.count() == 14
    failed = verdicts.filter(has_text=FAILED_BOOT).first.inner_text()
    assert f"boot failed: node0.log: {SCRIPT_LINE} {IMG_LINE}" in failed

    answer = page.locator('#ppsweep-answers .ppsweep-decision[data-kind="layout"]')
    assert answer.get_attribute("data-status") == "decided"
    assert "pp8-tp4-ep4" in answer.locator(".use").inner_text()
    assert answer.locator(".fallback").inner_text().startswith("Fallback: pp4-tp8-ep4")
    assert not log.problems(), log.problems()


def test_charts_are_drawn(context: BrowserContext, report: Path) -> None:
    page, log = open_report(context, report)
    sizes = svg_sizes(page, ".ppsweep .charts")
    assert len(sizes) == 5, sizes
    for width, height, shapes in sizes:
        assert width > 100 and height > 100 and shapes > 5, sizes
    titles = page.locator(".ppsweep .charts svg > title").all_text_contents()
    assert titles == ["Input TPS per layout", "TTFT p50 per layout",
                      "TTFT distribution per layout", "Worst-rank GPU memory per layout",
                      "Worst-rank GPU memory headroom per layout"]
    assert not log.problems(), log.problems()


def test_every_summary_link_resolves(context: BrowserContext, report: Path) -> None:
    page, log = open_report(context, report)
    found = links(page, ".ppsweep")
    hrefs = [link.href for link in found]
    assert set(EVIDENCE) <= set(hrefs)
    assert f"service/{HOSTILE_HREF}/" in hrefs  # the hostile id is percent-encoded in links
    # A configuration that never ran a round has no raw/ folder: plain text, not a dead link.
    assert len(found) == len(EVIDENCE) + 3 * 7 - 1
    assert f"raw/{FAILED_BOOT}/" not in hrefs
    assert "raw (not written)" in page.locator(".ppsweep").inner_text()
    checker = context.new_page()  # one tab follows every link in turn
    problems = [p for link in found if (p := link_problem(checker, report, link))]
    assert not problems, "\n".join(problems)
    assert not log.problems(), log.problems()


def test_link_labels_match_the_disk(context: BrowserContext, report: Path) -> None:
    page, _ = open_report(context, report)
    wrong = [link.href for link in links(page, ".ppsweep")
             if link.text.endswith("(not written)")]
    assert not wrong, f"labelled '(not written)' but present on disk: {wrong}"


def test_hostile_lines_show_as_text_and_run_nothing(context: BrowserContext,
                                                    report: Path) -> None:
    page, log = open_report(context, report)
    assert page.locator("script").count() == 0  # the standalone page needs no script at all
    assert_inert(page, log, ".ppsweep")
    text = page.locator(".ppsweep").inner_text()
    assert f"log scan: node1.log:7 {IMG_LINE}" in text
    assert f"Image\t{SCRIPT_LINE}" in text and f"Cluster\t{IMG_LINE}" in text
    assert page.title() == f"PP/TP/EP sweep {report.parent.name}"
