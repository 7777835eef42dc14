"""tools/screenshots.py (the walkthrough's images) keeps working: its screenshot part on a small
run folder (``--run``: no sweep) writes every PNG at the documented size, each under 300 KB."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from support.browser import chromium_missing
from support.paths import REPO as ROOT
from support.runs import seed_run

SCRIPT = ROOT / "tools" / "screenshots.py"
WALKTHROUGH = ROOT / "docs" / "WALKTHROUGH.md"
IMAGES = ("report-1400.png", "report-800.png", "terminal.png", "runs.png")


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_screenshots_of_a_run_folder(tmp_path: Path) -> None:
    reason = chromium_missing()
    if reason:
        pytest.skip(reason)
    run = seed_run(tmp_path / "reports" / "kimi3-pp-20261201-093000")
    out = tmp_path / "img"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, str(SCRIPT), "--run", str(run), "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(IMAGES)
    for name in IMAGES:
        assert (out / name).stat().st_size < 300 * 1024, name
    assert _png_size(out / "report-1400.png") == (1400, 900)
    assert _png_size(out / "report-800.png") == (800, 900)
    width, height = _png_size(out / "terminal.png")
    assert 600 < width <= 1000 and height > 200, (width, height)
    # The report was rebuilt into the run folder (it had no report.html of pytest-html).
    assert (run / "report-rebuilt.html").is_file()


def test_walkthrough_images_are_committed() -> None:
    """Every image the walkthrough shows is in docs/img/ and under 300 KB."""
    text = WALKTHROUGH.read_text(encoding="utf-8")
    for name in IMAGES:
        assert f"img/{name}" in text, name
        image = WALKTHROUGH.parent / "img" / name
        assert image.is_file() and image.stat().st_size < 300 * 1024, image
