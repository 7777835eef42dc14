"""The report's SLO block: the answers to the SLO question (gate/sloanswer.py), each layout's
search with its probes, and the Pareto front (report/pareto.py)."""

from __future__ import annotations

from html import escape
from pathlib import Path

from pytest_ppsweep.report import pareto
from pytest_ppsweep.results.sloanswer import answer_lines, answers_of, read_outcomes

__all__ = ["html_section", "terminal_lines"]


def html_section(run_dir: Path) -> str:
    """The SLO answers, the searches and the Pareto chart ("" without an SLO search)."""
    outcomes = read_outcomes(run_dir)
    if not outcomes:
        return ""
    answers = answers_of(run_dir)
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
            f"<tbody>{rows}</tbody></table>" + pareto.section_html(run_dir))


def terminal_lines(run_dir: Path) -> list[str]:
    """The SLO answers and the front for the terminal summary ([] without an SLO search)."""
    outcomes = read_outcomes(run_dir)
    if not outcomes:
        return []
    lines = ["Answers (SLO):", *answer_lines(answers_of(run_dir))]
    lines += [f"  {o['config_id']}: {o['text']}" for o in outcomes]
    return lines + pareto.terminal_lines(run_dir)
