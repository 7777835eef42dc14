"""The report's "Task accuracy" section: each layout's ``[accuracy]`` score with its 95 % Wilson
interval and n, and whether it passes against the run's reference layout (results/accuracy.py's
rule; the gate's comparison with a baseline run is test_accuracy's). Nothing without scores."""

from __future__ import annotations

from html import escape
from pathlib import Path

from pytest_ppsweep.report.format import fit_table
from pytest_ppsweep.results.accuracy import accuracy_problems, all_accuracy, reference_layout

__all__ = ["TITLE", "html_section", "terminal_lines"]

TITLE = "Task accuracy"
HEADERS = ("layout", "backend", "n", "right", "score", "95 % interval", "result")


def _rows(run_dir: Path) -> list[list[str]]:
    ref = reference_layout(run_dir)
    rows = []
    for a in all_accuracy(run_dir):
        low, high = a.interval
        problems = accuracy_problems(run_dir, a.config_id)
        result = ("reference" if a.config_id == ref and not problems else
                  "pass" if not problems else "FAIL")
        rows.append([a.config_id, a.backend, str(a.n), str(a.correct), f"{100 * a.score:.1f} %",
                     f"[{100 * low:.1f}, {100 * high:.1f}]", result])
    return rows


def html_section(run_dir: Path) -> str:
    """The section's HTML ("" when no layout has a score)."""
    rows = _rows(run_dir)
    if not rows:
        return ""
    head = "".join(f'<th{" class=l" if i < 2 else ""}>{escape(h)}</th>'
                   for i, h in enumerate(HEADERS))
    body = "".join("<tr>" + "".join(f'<td{" class=l" if i < 2 else ""}>{escape(c)}</td>'
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return (f'<h3 id="ppsweep-accuracy">{TITLE}</h3><table class="ppsweep-table"><thead><tr>'
            f"{head}</tr></thead><tbody>{body}</tbody></table>"
            "<p>Score: right answers of n questions (accuracy/&lt;layout&gt;.json); a layout "
            "fails significantly below the reference layout (one-sided, the [accuracy] "
            "α).</p>")


def terminal_lines(run_dir: Path, width: int = 100) -> list[str]:
    """The section for the terminal summary ([] when no layout has a score)."""
    rows = _rows(run_dir)
    if not rows:
        return []
    return ["", TITLE, *fit_table(HEADERS, rows, width, key=1)]
