"""The report's SLO block: the answers to the SLO question (results/sloanswer.py), each layout's
search with its probes, the searches charted (report/slocharts.py) and the Pareto front
(report/pareto.py). On the terminal the answers are only in the Answers block
(report/answerview.py); this block adds the searches and the front."""

from __future__ import annotations

from html import escape

from pytest_ppsweep.folder.runfolder import FolderFiles, FolderSource
from pytest_ppsweep.report import pareto, slocharts, sloreach
from pytest_ppsweep.report.format import wrap_lines
from pytest_ppsweep.results.sloanswer import answers_of

__all__ = ["html_section", "terminal_lines"]


def html_section(source: FolderSource) -> str:
    """The SLO answers, the searches (a table and their charts) and the Pareto chart (""
    without an SLO search)."""
    files = FolderFiles.of(source)
    outcomes = files.outcomes
    if not outcomes:
        return ""
    answers = answers_of(files)
    items = "".join(
        f"<li><b>{escape(a.question)}</b> [{escape(a.workload)}]: "
        f"<span class='ppsweep-status'>{escape(a.status)}</span>. "
        f"{escape(str(a.extra.get('text', '')))}"
        + (f"<br><i>to decide:</i> {escape(a.rerun)}" if a.rerun else "") + "</li>"
        for a in answers)
    rows = "".join(
        f"<tr><td>{escape(str(o['config_id']))}</td><td>{escape(str(o['status']))}</td>"
        f"<td>{escape(str(o['text']))}</td></tr>" for o in outcomes)
    return ('<h3 id="ppsweep-slo">Within the SLO</h3>'
            f"<ul class='ppsweep-slo-answers'>{items}</ul>"
            "<table><thead><tr><th>layout</th><th>search</th><th>highest load within the SLO "
            "(probes, precision, repeats)</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>" + _reach_html(files)
            + slocharts.section_html(files) + pareto.section_html(files))


def _reach_html(files: FolderFiles) -> str:
    """What would meet an SLO no layout met (report/sloreach.py), "" otherwise."""
    lines = sloreach.terminal_lines(files)
    # pre-wrap: the terminal's lines keep their breaks, a long one wraps (no sideways scroll)
    return ("<div class='ppsweep-slo-reach'><h4>What would meet the SLO</h4>"
            "<pre style='white-space:pre-wrap;overflow-wrap:anywhere'>"
            + escape("\n".join(lines)) + "</pre></div>") if lines else ""


def terminal_lines(source: FolderSource, width: int | None = None) -> list[str]:
    """Each layout's search and the front for the terminal summary ([] without an SLO
    search); the answers themselves are the Answers block's (report/answerview.py). With a
    ``width``, a longer line wraps (report/format.wrap_lines)."""
    files = FolderFiles.of(source)
    outcomes = files.outcomes
    if not outcomes:
        return []
    slos = list(dict.fromkeys(str(o.get("slo")) for o in outcomes))
    lines = [f"SLO searches (highest load within {' / '.join(slos)}):"]
    lines += [f"  {o['config_id']}: {o['text']}" for o in outcomes]
    lines += sloreach.terminal_lines(files) + pareto.terminal_lines(files)
    return lines if width is None else wrap_lines(lines, width)
