"""The report's "Task accuracy" section: each layout's ``[accuracy]`` score with its 95 % Wilson
interval and n, and whether it passes against the run's reference layout (results/accuracy.py's
rule; the gate's comparison with a baseline run is test_accuracy's). Nothing without scores."""

from __future__ import annotations

from html import escape

from pytest_ppsweep.folder.runfolder import FolderFiles
from pytest_ppsweep.report.format import fit_table
from pytest_ppsweep.results.accuracy import RunAccuracy

__all__ = ["TITLE", "html_section", "terminal_lines"]

TITLE = "Task accuracy"
HEADERS = ("layout", "backend", "n", "right", "score", "95 % interval", "result")


def _rows(files: FolderFiles) -> list[list[str]]:
    scores = RunAccuracy.of_files(files)
    ref = scores.reference
    rows = []
    for a in scores.scores:
        low, high = a.interval
        problems = scores.problems(a.config_id, files.dir)
        result = ("reference" if a.config_id == ref and not problems else
                  "pass" if not problems else "FAIL")
        rows.append([a.config_id, a.backend, str(a.n), str(a.correct), f"{100 * a.score:.1f} %",
                     f"[{100 * low:.1f}, {100 * high:.1f}]", result])
    return rows


def html_section(files: FolderFiles) -> str:
    """The section's HTML ("" when no layout has a score)."""
    rows = _rows(files)
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


def terminal_lines(files: FolderFiles, width: int = 100) -> list[str]:
    """The section for the terminal summary ([] when no layout has a score)."""
    rows = _rows(files)
    if not rows:
        return []
    return ["", TITLE, *fit_table(HEADERS, rows, width, key=1)]
