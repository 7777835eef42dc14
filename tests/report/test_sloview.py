"""The terminal's SLO block (report/sloview.py via report/summary.py): the searches and the
front, never the answers again; those are the Answers block's, also for a run that searched
only (``-k slo``: no results.csv, no sweep summary)."""

from __future__ import annotations

from pathlib import Path

from support.slo import searched

from pytest_ppsweep.report.summary import render


def test_an_slo_answer_is_printed_once_in_the_answers_block(tmp_path: Path) -> None:
    run = tmp_path / "run"
    searched(run, "pp8-tp4-ep4", 0.45, 0.6)
    searched(run, "pp4-tp8-ep4", 0.2, 0.3)
    lines = render(run).terminal
    text = "\n".join(lines)
    answers, searches = lines.index("Answers"), lines.index(
        "SLO searches (highest load within TTFT p50 ≤ 5 s):")
    assert answers < searches and "Answers (SLO)" not in text
    flat = " ".join(text.split())
    said = "pp8-tp4-ep4 carries the most load within TTFT p50 ≤ 5 s: ≥ 0.45 req/s and < 0.6 req/s"
    assert flat.count(said) == 1 and said in " ".join(" ".join(lines[:searches]).split())
    assert "  pp4-tp8-ep4: ≥ 0.2 req/s and < 0.3 req/s" in lines[searches:]


def test_the_slo_block_fits_the_terminals_width(tmp_path: Path) -> None:
    """At 60 columns every line of the SLO block wraps within the width (nothing cut: the
    words are all there, in order), a continuation indented under its line."""
    run = tmp_path / "run"
    searched(run, "pp8-tp4-ep4", 0.45, 0.6)
    searched(run, "pp4-tp8-ep4", 0.2, 0.3)
    wide = render(run, width=200).terminal
    narrow = render(run, width=60).terminal
    start = wide.index("SLO searches (highest load within TTFT p50 ≤ 5 s):")
    block = narrow[next(i for i, x in enumerate(narrow) if x.startswith("SLO searches")):]
    assert any(len(line) > 60 for line in wide[start:]), wide[start:]  # a case that wraps
    assert all(len(line) <= 60 for line in block), [x for x in block if len(x) > 60]
    assert " ".join(" ".join(block).split()) == " ".join(" ".join(wide[start:]).split())
