"""Glue between the run folder and what the plugin shows: HTML summary, terminal, table columns.

The numbers come only from the files in the run folder (aggregate.py), so the report a run shows
is the one ``python -m pytest_ppsweep report <run>`` rebuilds.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TABLE_HEADER = [
    '<th class="sortable" data-column-type="config">Configuration</th>',
    '<th class="sortable" data-column-type="c">C</th>',
    '<th class="sortable" data-column-type="tps">Input TPS</th>',
    '<th class="sortable" data-column-type="ttft">TTFT p50 (s)</th>',
]


def table_row(props: dict[str, Any]) -> list[str]:
    """The cells of TABLE_HEADER for one test report (values from its user_properties)."""

    def cell(col: str, value: Any) -> str:
        text = "" if value is None else str(value)
        if isinstance(value, float):
            text = f"{value:,.2f}"
        return f'<td class="col-{col}">{html.escape(text)}</td>'

    return [
        cell("config", props.get("ppsweep_config")),
        cell("c", props.get("concurrency")),
        cell("tps", props.get("input_tps")),
        cell("ttft", props.get("ttft_p50_s")),
    ]


@dataclass
class Rendered:
    """What the plugin shows at the end of a run."""

    html: list[str] = field(default_factory=list)
    terminal: list[str] = field(default_factory=list)


def render(run_dir: Path) -> Rendered:
    """Aggregate the run folder, write summary.csv, and render the HTML and terminal summary."""
    from pytest_ppsweep import report
    from pytest_ppsweep.aggregate import RunFolderError, write_summary

    try:
        data, summary, verdicts, rec = report.analyse(run_dir)
    except RunFolderError as exc:
        note = f"no summary: {exc}"
        return Rendered([f"<p>{html.escape(note)}</p>"], [note])
    write_summary(run_dir, summary)
    return Rendered(
        report.html_summary(data, summary, verdicts, rec),
        report.terminal_summary(summary, verdicts, rec, width=100),
    )
