"""Step 9, what a person reads: the HTML summary and charts, the terminal summary, the pytest-html
table cells and the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
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
    )
    from pytest_ppsweep.report.format import (
        delta,
        num,
        records,
    )
    from pytest_ppsweep.report.html import (
        EVIDENCE,
        REBUILT_NAME,
        analyse,
        build_report,
        html_summary,
        rebuild_report,
    )
    from pytest_ppsweep.report.summary import (
        INITIAL_SORT,
        TABLE_HEADER,
        Rendered,
        finish,
        layout_key,
        render,
        save_baseline,
        table_row,
    )
    from pytest_ppsweep.report.terminal import (
        terminal_summary,
    )

_NAMES = {
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
    "delta": "format",
    "num": "format",
    "records": "format",
    "EVIDENCE": "html",
    "REBUILT_NAME": "html",
    "analyse": "html",
    "build_report": "html",
    "html_summary": "html",
    "rebuild_report": "html",
    "INITIAL_SORT": "summary",
    "Rendered": "summary",
    "TABLE_HEADER": "summary",
    "finish": "summary",
    "layout_key": "summary",
    "render": "summary",
    "save_baseline": "summary",
    "table_row": "summary",
    "terminal_summary": "terminal",
}
__all__ = [
    "COMM_TITLE",
    "DEFAULT_REPORTS",
    "EVIDENCE",
    "EXIT_MISSING",
    "INITIAL_SORT",
    "PALETTE",
    "REBUILT_NAME",
    "TABLE_HEADER",
    "Rendered",
    "RunLine",
    "Spread",
    "analyse",
    "bar_chart",
    "build_parser",
    "build_report",
    "comm_html",
    "comm_rows",
    "comm_terminal",
    "compare_lines",
    "delta",
    "find_runs",
    "finish",
    "gate_lines",
    "gate_result",
    "html_summary",
    "layout_key",
    "log2_line_chart",
    "main",
    "num",
    "read_run_line",
    "rebuild_report",
    "records",
    "render",
    "resolve_run",
    "run_date",
    "runs_lines",
    "save_baseline",
    "show_lines",
    "spread_chart",
    "table_row",
    "terminal_summary",
]
__getattr__ = lazy(__name__, _NAMES)
