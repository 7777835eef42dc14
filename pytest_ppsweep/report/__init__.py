"""Step 9, what a person reads: the HTML summary and charts, the terminal summary, the pytest-html
table cells and the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.report.axes import (
        axis_sweep_html,
        comparisons_html,
        confounded_text,
    )
    from pytest_ppsweep.report.charts import (
        PALETTE,
        Spread,
        bar_chart,
        log2_line_chart,
        spread_chart,
    )
    from pytest_ppsweep.report.cli import (
        DEFAULT_REPORTS,
        EXIT_MISSING,
        RunLine,
        build_parser,
        compare_lines,
        find_runs,
        gate_lines,
        gate_result,
        main,
        read_run_line,
        resolve_run,
        run_date,
        runs_lines,
        show_lines,
    )
    from pytest_ppsweep.report.comm import (
        COMM_TITLE,
        comm_html,
        comm_rows,
        comm_terminal,
        smi_lines,
    )
    from pytest_ppsweep.report.format import (
        delta,
        num,
        records,
    )
    from pytest_ppsweep.report.html import (
        EVIDENCE,
        REBUILT_NAME,
        build_report,
        html_summary,
        rebuild_report,
    )
    from pytest_ppsweep.report.plannerview import (
        html_section,
        terminal_lines,
    )
    from pytest_ppsweep.report.profile import (
        BAR_COLORS,
        KIND_LABEL,
        profile_section,
        share_bars,
    )
    from pytest_ppsweep.report.summary import (
        INITIAL_SORT,
        TABLE_HEADER,
        Rendered,
        layout_key,
        planner_lines,
        render,
        render_gate,
        table_row,
    )
    from pytest_ppsweep.report.terminal import (
        terminal_summary,
    )

_NAMES = {
    "axis_sweep_html": "axes",
    "comparisons_html": "axes",
    "confounded_text": "axes",
    "PALETTE": "charts",
    "Spread": "charts",
    "bar_chart": "charts",
    "log2_line_chart": "charts",
    "spread_chart": "charts",
    "DEFAULT_REPORTS": "cli",
    "EXIT_MISSING": "cli",
    "RunLine": "cli",
    "build_parser": "cli",
    "compare_lines": "cli",
    "find_runs": "cli",
    "gate_lines": "cli",
    "gate_result": "cli",
    "main": "cli",
    "read_run_line": "cli",
    "resolve_run": "cli",
    "run_date": "cli",
    "runs_lines": "cli",
    "show_lines": "cli",
    "COMM_TITLE": "comm",
    "comm_html": "comm",
    "comm_rows": "comm",
    "comm_terminal": "comm",
    "smi_lines": "comm",
    "delta": "format",
    "num": "format",
    "records": "format",
    "EVIDENCE": "html",
    "REBUILT_NAME": "html",
    "build_report": "html",
    "html_summary": "html",
    "rebuild_report": "html",
    "html_section": "plannerview",
    "terminal_lines": "plannerview",
    "BAR_COLORS": "profile",
    "KIND_LABEL": "profile",
    "profile_section": "profile",
    "share_bars": "profile",
    "INITIAL_SORT": "summary",
    "Rendered": "summary",
    "TABLE_HEADER": "summary",
    "layout_key": "summary",
    "planner_lines": "summary",
    "render": "summary",
    "render_gate": "summary",
    "table_row": "summary",
    "terminal_summary": "terminal",
}
__all__ = [
    "BAR_COLORS",
    "COMM_TITLE",
    "DEFAULT_REPORTS",
    "EVIDENCE",
    "EXIT_MISSING",
    "INITIAL_SORT",
    "KIND_LABEL",
    "PALETTE",
    "REBUILT_NAME",
    "TABLE_HEADER",
    "Rendered",
    "RunLine",
    "Spread",
    "axis_sweep_html",
    "bar_chart",
    "build_parser",
    "build_report",
    "comm_html",
    "comm_rows",
    "comm_terminal",
    "compare_lines",
    "comparisons_html",
    "confounded_text",
    "delta",
    "find_runs",
    "gate_lines",
    "gate_result",
    "html_section",
    "html_summary",
    "layout_key",
    "log2_line_chart",
    "main",
    "num",
    "planner_lines",
    "profile_section",
    "read_run_line",
    "rebuild_report",
    "records",
    "render",
    "render_gate",
    "resolve_run",
    "run_date",
    "runs_lines",
    "share_bars",
    "show_lines",
    "smi_lines",
    "spread_chart",
    "table_row",
    "terminal_lines",
    "terminal_summary",
]
__getattr__ = lazy(__name__, _NAMES)
