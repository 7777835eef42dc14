"""Plain helpers of the browser tests: find or install Chromium, open a report, read what it shows.

The browser is Debian's ``chromium`` (``scripts/install_browser.sh``) driven by Playwright for
Python through ``executable_path``: Playwright's own browser download is never used.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from playwright.sync_api import BrowserContext, Download, Page
from playwright.sync_api import Error as PlaywrightError

from support.paths import SCRIPTS

INSTALL_SCRIPT = SCRIPTS / "install_browser.sh"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Hostile "log lines": if either runs, window.__pwned is set (and the <img> logs a load error).
SCRIPT_LINE = "<script>window.__pwned=1</script>"
IMG_LINE = '<img src=x onerror="window.__pwned=2">'
HOSTILE = (SCRIPT_LINE, IMG_LINE)


def chromium_missing() -> str | None:
    """None when Chromium is usable, else why not (after trying the install script once)."""
    if os.access(CHROMIUM, os.X_OK):
        return None
    try:
        done = subprocess.run(["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True,
                              timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{CHROMIUM} is not installed and {INSTALL_SCRIPT.name} could not run: {exc}"
    if done.returncode == 0 and os.access(CHROMIUM, os.X_OK):
        return None
    why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return f"{CHROMIUM} is not installed and scripts/install_browser.sh could not install it: {why}"


@dataclass
class PageLog:
    """What a page reported while it was open: console errors, uncaught errors, requests."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        foreign = [u for u in self.requests if urlsplit(u).scheme not in ("file", "data", "about")]
        return ([f"console error: {m}" for m in self.console_errors]
                + [f"page error: {m}" for m in self.page_errors]
                + [f"request left the file system: {u}" for u in foreign]
                + [f"request failed: {m}" for m in self.failed_requests])


def open_report(context: BrowserContext, report: Path) -> tuple[Page, PageLog]:
    """Open ``report`` over file:// with every console error, page error and request recorded."""
    page = context.new_page()
    log = PageLog()
    page.on("console", lambda m: log.console_errors.append(f"{m.text} at {m.location}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: log.page_errors.append(str(e)))
    page.on("request", lambda r: log.requests.append(r.url))
    page.on("requestfailed", lambda r: log.failed_requests.append(f"{r.url}: {r.failure}"))
    response = page.goto(report.resolve().as_uri(), wait_until="load")
    assert response is None or response.ok, f"{report}: status {response.status}"
    return page, log


@dataclass(frozen=True)
class Link:
    href: str  # as written in the page
    url: str  # as the browser resolves it
    text: str


def links(page: Page, selector: str) -> list[Link]:
    raw: list[list[str]] = page.eval_on_selector_all(
        f"{selector} a[href]",
        "els => els.map(e => [e.getAttribute('href'), e.href, e.textContent])")
    return [Link(*item) for item in raw]


def link_problem(page: Page, report: Path, link: Link) -> str | None:
    """None when ``link`` points inside the run folder at something on disk that the browser
    loads in ``page`` (a folder listing, a page, or a download with the file's bytes)."""
    split = urlsplit(link.url)
    if split.scheme != "file":
        return f"{link.href!r} resolves to {link.url}, not a file next to the report"
    target = Path(unquote(split.path))
    run_dir = report.resolve().parent
    if not target.resolve().is_relative_to(run_dir):
        return f"{link.href!r} leaves the run folder: {target}"
    if not target.exists():
        return f"{link.href!r} ({link.text.strip()}): {target} does not exist"
    if link.href.endswith("/") != target.is_dir():
        return f"{link.href!r}: {target} is {'a folder' if target.is_dir() else 'a file'}"
    downloads: list[Download] = []

    def on_download(download: Download) -> None:
        downloads.append(download)

    page.on("download", on_download)
    try:
        try:
            response = page.goto(link.url, wait_until="load")
        except PlaywrightError as exc:
            if "Download is starting" not in exc.message:
                return f"{link.href!r}: the browser could not open {link.url}: {exc.message}"
            download = downloads[0] if downloads else page.wait_for_event("download")
            got = Path(download.path()).read_bytes()
            if got != target.read_bytes():
                return f"{link.href!r}: the download differs from {target}"
            return None
        if response is not None and not response.ok:
            return f"{link.href!r}: status {response.status}"
        body = page.inner_text("body")
        if target.is_dir():
            names = sorted(p.name for p in target.iterdir())
            missing = [n for n in names if n not in body]
            return f"{link.href!r}: listing lacks {missing}" if missing else None
        if target.stat().st_size and not body.strip():
            return f"{link.href!r}: {target} shows an empty page"
        return None
    finally:
        page.remove_listener("download", on_download)


def assert_inert(page: Page, log: PageLog, container: str) -> None:
    """The hostile lines show as text inside ``container`` and ran nothing."""
    assert page.evaluate("typeof window.__pwned") == "undefined", "a hostile line ran"
    assert page.evaluate("document.querySelectorAll('[onerror]').length") == 0
    # innerText holds only rendered text: what a reader of the report sees.
    shown = page.locator(container).first.inner_text()
    for line in HOSTILE:
        assert line in shown, f"{line!r} not shown as text in {container}"
    # (pytest-html's own row template holds an empty <img src=""> for media extras.)
    injected = page.locator(f"{container} script, {container} img[src='x']")
    assert injected.count() == 0, "a hostile line became an element"
    assert not log.problems(), log.problems()


def table_after(page: Page, heading: str) -> tuple[list[str], list[list[str]]]:
    """Header cells and body rows of the first table after the <h3> that starts with
    ``heading`` (inside the sweep summary)."""
    table = page.locator(
        f"xpath=//div[contains(@class,'ppsweep')]//h3[starts-with(normalize-space(.),"
        f" '{heading}')]/following-sibling::table[1]")
    assert table.count() == 1, f"no table after heading {heading!r}"
    assert table.is_visible(), f"table after {heading!r} is not visible"
    headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    rows = [[c.strip() for c in row.locator("td").all_inner_texts()]
            for row in table.locator("tbody tr").all()]
    return headers, rows


def svg_sizes(page: Page, selector: str) -> list[tuple[float, float, int]]:
    """(width, height, drawn shapes) of each inline <svg> under ``selector`` as laid out."""
    sizes: list[tuple[float, float, int]] = page.eval_on_selector_all(
        f"{selector} svg",
        """els => els.map(e => { const r = e.getBoundingClientRect();
            const shapes = [...e.querySelectorAll('rect,path,line,polyline,circle')]
              .filter(s => { const b = s.getBBox(); return b.width > 0 || b.height > 0; });
            return [r.width, r.height, shapes.length]; })""")
    return sizes


SCREEN_HEIGHT = 900
SCREEN_WIDTHS = (1400, 800)

# Every laid-out element whose box is wider than the viewport or sticks out on either side
# (an element of a scrolled container counts too: it makes a reader scroll sideways).
_TOO_WIDE = """() => { const w = window.innerWidth; const out = [];
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.width > w + 0.5 || r.right > w + 0.5 || r.left < -0.5) {
      const id = e.id ? '#' + e.id : '';
      const cls = typeof e.className === 'string' && e.className ? '.' + e.className : '';
      const box = `${Math.round(r.left)}..${Math.round(r.right)}`;
      out.push(`${e.tagName.toLowerCase()}${id}${cls} ${box}`);
    }
  }
  return out; }"""


def overflow_problems(page: Page) -> list[str]:
    """Why ``page`` scrolls sideways at its viewport width ([] when it does not)."""
    width = page.evaluate("window.innerWidth")
    scroll = page.evaluate("document.documentElement.scrollWidth")
    problems = [f"scrollWidth {scroll} > viewport {width}"] if scroll > width else []
    wide: list[str] = page.evaluate(_TOO_WIDE)
    return problems + [f"wider than {width} px: {w}" for w in wide[:20]]


def top_of(page: Page, selector: str) -> float:
    """The top of the first element matching ``selector``, in CSS px from the page's top."""
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not laid out"
    return float(box["y"])
