"""Screenshots of a real run for docs/WALKTHROUGH.md (docs/img/).

    python tools/screenshots.py                 # run the seeds' sweep on the emulator (~2 min)
    python tools/screenshots.py --run DIR       # only the screenshots, of an existing run folder

Without ``--run`` it runs ``pytest test_matrix`` (the seeds' sweep on the emulated cluster) into
a temporary reports folder and keeps what the terminal showed, then a second run of PP8 alone
with another image, gated against the first (for ``runs``). Then, with Debian's Chromium
(``scripts/install_browser.sh``) driven by Playwright:

* ``report-1400.png``, ``report-800.png``: the first screen (900 px high) of the run's
  report.html (pytest-html's page; ``report-rebuilt.html`` is built when a run folder has none)
  at 1400 and 800 px wide;
* ``terminal.png``: the terminal summary (the run's own output, or ``python -m pytest_ppsweep
  show`` of the folder), rendered as a ``<pre>``;
* ``runs.png``: ``python -m pytest_ppsweep runs`` of the reports folder.

Each PNG stays well under 300 KB (the page is a screenshot of one screen, not the whole page).
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update"]
WIDTHS = (1400, 800)
HEIGHT = 900
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_TERMINAL_CSS = ("body{margin:0;background:#1e1e1e}pre{margin:0;padding:14px 18px;color:#ddd;"
                 "background:#1e1e1e;font:13px/1.35 'DejaVu Sans Mono',monospace;"
                 "display:inline-block}.sep{color:#8cf}.bad{color:#f77}.ok{color:#7d7}")


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def sweep_matrix(folder: Path) -> Path:
    """test_matrix/ppsweep.toml and the cluster.toml it extends, with the emulated cluster moved
    to loopback addresses and ports of its own, so that a test run on the same machine cannot
    answer this sweep's requests."""
    n = 100 + os.getpid() % 100
    text = (ROOT / "test_matrix" / "cluster.toml").read_text(encoding="utf-8")
    text = text.replace('"127.0.6.', f'"127.0.{n}.')
    text = text.replace("port = 30000", f"port = {36000 + n}", 1)
    text = text.replace("dist_init_port = 20000", f"dist_init_port = {26000 + n}", 1)
    if f'"127.0.{n}.' not in text or f"port = {36000 + n}" not in text:
        raise SystemExit("test_matrix/cluster.toml changed shape: no emulated cluster to move")
    (folder / "cluster.toml").write_text(text, encoding="utf-8")
    path = folder / "ppsweep.toml"
    shutil.copyfile(ROOT / "test_matrix" / "ppsweep.toml", path)
    return path


def sweep(reports: Path, matrix: Path, *args: str) -> tuple[Path, str]:
    """Run the seeds' sweep on the emulator into ``reports`` (``args`` go to pytest); the new
    run folder and the terminal output from the summary on."""
    before = {p.name for p in reports.iterdir()}
    env = {**_env(), "PPSWEEP_SIM_STATE_DIR": str(matrix.parent / "sim-state")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "test_matrix", "-p", "no:cacheprovider",
         "--ppsweep-matrix", str(matrix), "--ppsweep-reports", str(reports), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    runs = [p for p in reports.iterdir() if p.is_dir() and p.name not in before | {"baselines"}]
    if len(runs) != 1:
        raise SystemExit(f"expected one new run folder in {reports}, found {runs}\n{done.stdout}")
    text = _SGR.sub("", done.stdout)
    start = text.find("ppsweep summary:")
    start = text.rfind("\n", 0, start) + 1 if start >= 0 else 0
    return runs[0], text[start:].rstrip() + "\n"


def _cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pytest_ppsweep", *args], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def terminal_page(text: str, title: str) -> str:
    """The terminal text as a dark ``<pre>`` page (separators blue, INVALID/REGRESSION red)."""
    lines = []
    for line in text.rstrip("\n").splitlines():
        cls = ("sep" if line.startswith("=") else
               "bad" if re.search(r"\b(INVALID|REGRESSION|FAILED)\b", line) else
               "ok" if re.search(r"\bpassed\b", line) else "")
        body = html.escape(line)
        lines.append(f'<span class="{cls}">{body}</span>' if cls else body)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{_TERMINAL_CSS}</style></head><body><pre>"
            + "\n".join(lines) + "</pre></body></html>\n")


def report_page(run_dir: Path) -> Path:
    """The run's report.html, or a rebuilt one when pytest-html did not write it."""
    page = run_dir / "report.html"
    if page.is_file():
        return page
    from pytest_ppsweep.report.html import build_report

    return build_report(run_dir)


def screenshots(run_dir: Path, terminal: str, out: Path, reports: Path | None = None
                ) -> list[Path]:
    """The PNGs of ``run_dir`` (and of ``runs`` over ``reports``) into ``out``."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    report = report_page(run_dir)
    pages = {"terminal": terminal_page(terminal, "ppsweep terminal summary")}
    if reports is not None:
        pages["runs"] = terminal_page("$ python -m pytest_ppsweep runs\n"
                                      + _cli("runs", "--reports", str(reports)), "runs")
    written = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for width in WIDTHS:
                ctx = browser.new_context(viewport={"width": width, "height": HEIGHT})
                page = ctx.new_page()
                page.goto(report.resolve().as_uri(), wait_until="load")
                if report.name == "report.html":  # pytest-html renders its table by script
                    page.wait_for_selector("#results-table", state="attached")
                path = out / f"report-{width}.png"
                page.screenshot(path=str(path))
                written.append(path)
                ctx.close()
            ctx = browser.new_context(viewport={"width": 1000, "height": 600})
            for name, text in pages.items():
                source = Path(tmp) / f"{name}.html"
                source.write_text(text, encoding="utf-8")
                page = ctx.new_page()
                page.goto(source.as_uri(), wait_until="load")
                path = out / f"{name}.png"
                page.locator("pre").screenshot(path=str(path))
                written.append(path)
            ctx.close()
        finally:
            browser.close()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="an existing run folder: no sweep is run")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img",
                        help="where the PNGs go (default: docs/img)")
    parser.add_argument("--keep", type=Path, help="copy the sweep's run folder here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ppsweep-shots-") as tmp:
        if args.run is not None:
            run_dir, reports = args.run, args.run.parent
            terminal = _cli("show", str(run_dir))
        else:
            reports = Path(tmp) / "reports"
            reports.mkdir()
            matrix = sweep_matrix(Path(tmp))
            run_dir, terminal = sweep(reports, matrix)
            # A second, gated run of one layout with a "new image", so that `runs` shows a gate.
            sweep(reports, matrix, "--ppsweep-config", "pp8", "--ppsweep-image",
                  "local/sglang:new", "--ppsweep-compare", run_dir.name)
            if args.keep is not None:
                shutil.copytree(run_dir, args.keep / run_dir.name, dirs_exist_ok=True)
        for path in screenshots(run_dir, terminal, args.out, reports):
            print(f"{path} ({path.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
