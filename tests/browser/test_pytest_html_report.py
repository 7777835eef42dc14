"""pytest-html's own page of a run with the plugin loaded, in a real browser: the sweep summary and
the plugin's columns render, pytest-html's scripts raise no error, a hostile failure shows as text.

The sweep run needs the emulator (``python -m pytest_ppsweep.sim``); the plain run does not.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page
from support.browser import (
    IMG_LINE,
    SCREEN_HEIGHT,
    SCREEN_WIDTHS,
    SCRIPT_LINE,
    PageLog,
    assert_inert,
    link_problem,
    links,
    open_report,
    overflow_problems,
    svg_sizes,
    table_after,
    top_of,
)
from support.matrices import CONFIGS, small_matrix
from support.paths import ACCEPTANCE
from support.processes import sim_processes
from support.runs import run_dir

from pytest_ppsweep.report.html import EVIDENCE

PLUGIN_COLUMNS = ["Configuration", "C", "Input TPS", "TTFT p50"]
HOSTILE_TEST = f'''
def test_hostile_log_line(record_property):
    record_property("input_tps", {IMG_LINE!r})
    assert False, "fatal lines in the service logs:\\n  node0.log:3 {SCRIPT_LINE}\\n" + {
    f"  node1.log:9 {IMG_LINE}"!r}
'''
PLAIN_TESTS = '''
import pytest

@pytest.mark.parametrize("config, tps", [("pp8-tp4-ep4", 10000.0), ("pp4-tp8-ep4", 900.0),
                                         ("pp2-tp16-ep4", 2500.0), ("pp1-tp32-ep4", 30.0)])
def test_layout(config, tps, record_property):
    record_property("ppsweep_config", config)
    record_property("input_tps", tps)
'''


def _pytest_html(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*[str(a) for a in args], "-p", "no:cacheprovider",
                                         timeout=120)


def _open_pytest_html(context: BrowserContext, report: Path) -> tuple[Page, PageLog]:
    page, log = open_report(context, report)
    # pytest-html renders the results table from its JSON blob once the page has loaded.
    page.wait_for_selector("#results-table tbody.results-table-row", state="attached")
    return page, log


def _headers(page: Page) -> list[str]:
    return [h.strip() for h in page.locator("#results-table-head th").all_inner_texts()]


def _check_plugin_columns(page: Page) -> None:
    headers = _headers(page)
    assert "Test" in headers, headers
    start = headers.index("Test") + 1
    got = headers[start:start + len(PLUGIN_COLUMNS)]
    assert [h.split(" (")[0] for h in got] == PLUGIN_COLUMNS, headers


def _check_hostile_failure(page: Page, log: PageLog) -> None:
    row = page.locator("#results-table tbody.results-table-row",
                       has_text="test_hostile_log_line")
    assert row.count() == 1
    assert row.locator("td.col-result").inner_text().strip() == "Failed"
    failure = row.locator(".log")
    assert failure.is_visible(), "a failure's text should be shown expanded"
    text = failure.inner_text()
    assert f"node0.log:3 {SCRIPT_LINE}" in text and f"node1.log:9 {IMG_LINE}" in text
    # The plugin's own cell (a user property) is escaped as well.
    assert row.locator("td.col-tps").inner_text() == IMG_LINE
    assert_inert(page, log, "#results-table")


def _cells(page: Page, column: str) -> list[str]:
    return page.locator(f"#results-table tbody.results-table-row td.col-{column}").all_inner_texts()


@pytest.fixture(scope="module")
def plain_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest-html's page of a run without a sweep file (the plugin's columns are still there);
    one run shared by the tests of this module."""
    folder = tmp_path_factory.mktemp("plain")
    (folder / "test_hostile.py").write_text(HOSTILE_TEST)
    (folder / "test_layouts.py").write_text(PLAIN_TESTS)
    html = folder / "out" / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", folder,
         "--html", html, "--self-contained-html", folder],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.rstrip().splitlines()[-1].startswith("1 failed, 4 passed"), done.stdout
    return html


def test_plain_run_page(context: BrowserContext, plain_report: Path) -> None:
    page, log = _open_pytest_html(context, plain_report)
    _check_plugin_columns(page)
    assert sorted(_cells(page, "config")) == ["", "pp1-tp32-ep4", "pp2-tp16-ep4",
                                                "pp4-tp8-ep4", "pp8-tp4-ep4"]
    assert "10,000.00" in _cells(page, "tps")
    _check_hostile_failure(page, log)
    # Sorting by a plugin column goes through pytest-html's scripts: still no error.
    for column in ("config", "c", "tps", "ttft"):
        page.click(f'#results-table-head th[data-column-type="{column}"]')
    assert len(_cells(page, "config")) == 5
    assert not log.problems(), log.problems()


def test_input_tps_sorts_by_number(context: BrowserContext, plain_report: Path) -> None:
    page, log = _open_pytest_html(context, plain_report)
    header = page.locator('#results-table-head th[data-column-type="tps"]')
    orders = []
    for _ in range(2):  # both directions
        header.click()
        orders.append([float(v.replace(",", "")) for v in _cells(page, "tps")
                       if re.fullmatch(r"[\d,.]+", v)])
    assert not log.problems(), log.problems()
    assert sorted(orders[0]) in orders and sorted(orders[0], reverse=True) in orders, orders


def _sim_missing() -> str | None:
    try:
        done = subprocess.run([sys.executable, "-m", "pytest_ppsweep.sim", "--help"],
                              capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return "`python -m pytest_ppsweep.sim --help` did not finish within 60 s"
    if done.returncode == 0:
        return None
    why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return f"the emulator does not start (`python -m pytest_ppsweep.sim --help`: {why})"


def _sweep_folder(pytester: pytest.Pytester, tmp_path: Path) -> tuple[Path, int]:
    """The e2e tests' small matrix on 127.0.11.1-4 and ports 33000-33999, plus a hostile test."""
    port = 33000 + (os.getpid() % 40) * 10  # 33000-33390; the rendezvous port is +500
    folder = pytester.path / "sweep"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(small_matrix(
        CONFIGS, net="127.0.11", port=port, dist=port + 500, scale=2000,
        state=tmp_path / "sim-state"))
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    (folder / "test_hostile.py").write_text(HOSTILE_TEST)
    return folder, port


def test_sweep_run_page(pytester: pytest.Pytester, tmp_path: Path,
                        context: BrowserContext) -> None:
    reason = _sim_missing()
    if reason:
        pytest.skip(reason)
    folder, port = _sweep_folder(pytester, tmp_path)
    reports = tmp_path / "reports"
    try:
        result = _pytest_html(pytester, folder, "-v", "--ppsweep-reports", reports)
    finally:
        left = sim_processes(f"--port {port}")
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert not left, f"emulator ranks left running: {left}"
    result.assert_outcomes(passed=16, failed=1, deselected=4)
    report = run_dir(reports) / "report.html"
    page, log = _open_pytest_html(context, report)

    # The sweep summary sits in pytest-html's summary section.
    summary = ".summary .additional-summary.prefix .ppsweep"
    assert page.locator(summary).is_visible()
    assert page.locator(".ppsweep-banner").inner_text().startswith("SIMULATED RUN")
    _, medians = table_after(page, "Medians over repeats")
    assert {(r[1], r[2]) for r in medians} == {
        (c, k) for c in ("pp4-tp8-ep4", "pp8-tp4-ep4") for k in ("2", "4")}
    _, steps = table_after(page, "Step-to-step deltas")
    assert [r[:2] for r in steps] == [["pp4-tp8-ep4 -> pp8-tp4-ep4", "2"],
                                      ["pp4-tp8-ep4 -> pp8-tp4-ep4", "4"]]
    _, memory = table_after(page, "GPU memory")
    assert [r[1] for r in memory] == ["pp4-tp8-ep4", "pp8-tp4-ep4"]
    assert all(r[2].endswith(" MiB") and r[2] != "n/a" for r in memory), memory
    assert page.locator(f"{summary} h3", has_text="Verdicts").count() == 1
    assert page.locator(f"{summary} h3", has_text="Reasons and evidence").count() == 1
    sizes = svg_sizes(page, f"{summary} .charts")
    assert len(sizes) == 5 and all(w > 0 and h > 0 and n > 0 for w, h, n in sizes), sizes

    # Every link of the summary resolves next to report.html, and nothing is "(not written)".
    found = links(page, summary)
    assert set(EVIDENCE) <= {link.href for link in found}
    assert len(found) == len(EVIDENCE) + 3 * 2
    checker = context.new_page()
    problems = [p for link in found if (p := link_problem(checker, report, link))]
    problems += [f"{link.href}: {link.text}" for link in found if "not written" in link.text]
    assert not problems, "\n".join(problems)

    # pytest-html's results table: the plugin's columns, filled for the sweep's tests.
    _check_plugin_columns(page)
    prefill = page.locator("#results-table tbody.results-table-row", has_text="test_prefill[")
    assert prefill.count() == 4
    for i in range(prefill.count()):
        row = prefill.nth(i)
        assert row.locator("td.col-config").inner_text() in ("pp4-tp8-ep4", "pp8-tp4-ep4")
        assert row.locator("td.col-c").inner_text() in ("2", "4")
        assert float(row.locator("td.col-tps").inner_text().replace(",", "")) > 0
        assert float(row.locator("td.col-ttft").inner_text().replace(",", "")) > 0
    _check_hostile_failure(page, log)
    assert page.locator(f"{summary} script, {summary} img").count() == 0
    assert not log.problems(), log.problems()
    _check_grouped_by_layout(page)
    _check_first_screen(context, report, tmp_path)


def _check_grouped_by_layout(page: Page) -> None:
    """The results table starts sorted by layout (pp4 before pp8), each layout's tests together
    in the order they ran, the tests of no layout last."""
    configs = _cells(page, "config")
    assert configs == sorted(configs, key=lambda c: (c == "", c)), configs
    tests = page.locator("#results-table tbody.results-table-row td.col-testId").all_inner_texts()
    pp8 = [t for t, c in zip(tests, configs, strict=True) if c == "pp8-tp4-ep4"]
    assert [t.split("::")[-1].split("[")[0] for t in pp8] == [
        "test_topology", "test_prefill", "test_prefill", "test_valid", "test_valid",
        "test_outputs_match", "test_logs_clean", "test_gpu_memory"]


def _check_first_screen(context: BrowserContext, report: Path, tmp_path: Path) -> None:
    """At 1400 and 800 px: the banner and the recommendation within the first 900 px, and
    nothing wider than the screen (screenshots in the test's tmp dir)."""
    browser = context.browser
    assert browser is not None
    for width in SCREEN_WIDTHS:
        ctx = browser.new_context(viewport={"width": width, "height": SCREEN_HEIGHT})
        try:
            page, log = _open_pytest_html(ctx, report)
            page.screenshot(path=str(tmp_path / f"pytest-html-{width}.png"))
            problems = overflow_problems(page)
            assert not problems, f"{width} px:\n" + "\n".join(problems)
            assert top_of(page, ".ppsweep-banner") < SCREEN_HEIGHT, width
            assert top_of(page, ".ppsweep-decision") < SCREEN_HEIGHT, width
            # the answers are lifted above pytest-html's own title and environment (issue 28)
            assert top_of(page, ".ppsweep-decision") < top_of(page, "#title"), width
            assert top_of(page, ".ppsweep-decision") < top_of(page, "#environment-header"), width
            assert not log.problems(), log.problems()
        finally:
            ctx.close()


@pytest.mark.parametrize(("args", "ini", "expected"), [
    ((), "", "config"),  # the plugin's default: grouped by layout
    (("-o", "initial_sort=duration"), "", "duration"),  # the user's choice wins
    ((), "[pytest]\ninitial_sort = result\n", "result"),
])
def test_initial_sort_is_the_layout_unless_chosen(tmp_path: Path, args: tuple[str, ...],
                                                  ini: str, expected: str) -> None:
    (tmp_path / "test_layouts.py").write_text(PLAIN_TESTS)
    if ini:
        (tmp_path / "pytest.ini").write_text(ini)
    html = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", tmp_path,
         "--html", html, *args, tmp_path], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, check=False)
    assert done.returncode == 0, done.stdout
    blob = re.search(r'data-jsonblob="([^"]*)"', html.read_text(encoding="utf-8"))
    assert blob is not None
    assert f"&#34;initialSort&#34;: &#34;{expected}&#34;" in blob.group(1) or (
        f'&quot;initialSort&quot;: &quot;{expected}&quot;' in blob.group(1)), blob.group(1)[:300]
