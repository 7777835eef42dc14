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
        spread_chart,
    )
    from pytest_ppsweep.report.cli import (
        EXIT_MISSING,
        compare_lines,
        main,
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
        TABLE_HEADER,
        Rendered,
        finish,
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
    "spread_chart": "charts",
    "EXIT_MISSING": "cli",
    "compare_lines": "cli",
    "main": "cli",
    "delta": "format",
    "num": "format",
    "records": "format",
    "EVIDENCE": "html",
    "REBUILT_NAME": "html",
    "analyse": "html",
    "build_report": "html",
    "html_summary": "html",
    "rebuild_report": "html",
    "Rendered": "summary",
    "TABLE_HEADER": "summary",
    "finish": "summary",
    "render": "summary",
    "save_baseline": "summary",
    "table_row": "summary",
    "terminal_summary": "terminal",
}
__all__ = [
    "EVIDENCE",
    "EXIT_MISSING",
    "PALETTE",
    "REBUILT_NAME",
    "TABLE_HEADER",
    "Rendered",
    "Spread",
    "analyse",
    "bar_chart",
    "build_report",
    "compare_lines",
    "delta",
    "finish",
    "html_summary",
    "main",
    "num",
    "rebuild_report",
    "records",
    "render",
    "save_baseline",
    "spread_chart",
    "table_row",
    "terminal_summary",
]
__getattr__ = lazy(__name__, _NAMES)
