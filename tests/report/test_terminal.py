"""Terminal summary: seed-like table, every line within the width."""

from __future__ import annotations

from pathlib import Path

from support.runs import Point, config_row, rounds, seed_run, write_run

from pytest_ppsweep.report.terminal import terminal_summary
from pytest_ppsweep.results.pipeline import analyse


def _lines(run: Path, width: int = 100) -> list[str]:
    _, summary, verdicts, rec = analyse(run)
    return terminal_summary(summary, verdicts, rec, width=width)


def test_seed_table(tmp_path: Path) -> None:
    lines = _lines(seed_run(tmp_path / "seed"))
    header = lines[1]
    for name in ("PP/TP/EP", "C", "Input TPS", "TTFT p50", "TTFT p95", "ΔTPS", "ΔTTFT", "verdict"):
        assert name in header
    pp8 = next(line for line in lines if line.startswith("8 / 4 / 4") and " 8 " in line)
    assert "8,809.50" in pp8 and "13.47 s" in pp8 and "+170.40 %" in pp8 and "VALID" in pp8
    assert any(line.startswith("1 / 32 / 4") and "base" in line for line in lines)
    assert "[layout] DECIDED: pp8-tp4-ep4, fallback pp4-tp8-ep4" in "\n".join(lines)
    assert all(len(line) <= 100 for line in lines)


def test_long_ids_and_failures_fit(tmp_path: Path) -> None:
    long_id = "pp8-tp4-ep4-" + "x" * 150
    rows = rounds(Point(long_id, 8, 4, 4, 8, 8800.0, 13.5, 16.4))
    rows += rounds(Point("dup", 8, 4, 4, 8, 8000.0, 15.0, 16.0), jitter=0.05)
    configs = [config_row(long_id, 8, 4, 4, 0, 79_000, log_clean=False,
                          log_findings="Traceback " * 40),
               config_row("dup", 8, 4, 4, 1, 79_000)]
    run = write_run(tmp_path / "long", rows, configs)
    for width in (100, 80):
        lines = _lines(run, width)
        assert all(len(line) <= width for line in lines), max(lines, key=len)
    text = "\n".join(_lines(run))
    # Same layout twice: the table names the config ids instead; the long one is never cut:
    # wider than the terminal, each value goes on a "title: value" line of its own, wrapped
    assert any(line.startswith("config: pp8-tp4-ep4-xxx") for line in _lines(run))
    assert "dup" in text
    assert "INVALID" in text
    lines = _lines(run, 80)
    first = next(i for i, line in enumerate(lines) if line.startswith("config: "))
    assert "config: " + long_id in "".join(line.strip() for line in lines[first:first + 3])
