"""Step 8, gating an image: noise-aware comparison with a reference run, the pytest-benchmark
export and named baselines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.gate.comparison import (
        TABLE_TITLES,
        compare,
        comparison_html,
        correctness_lines,
        notable_lines,
        parse_thresholds,
        regressions,
        table_rows,
        verdict_counts,
        write_comparison_csv,
    )
    from pytest_ppsweep.gate.differs import add_differs_column, differs_html, differs_lines

_NAMES = {
    "compare": "comparison",
    "comparison_html": "comparison",
    "correctness_lines": "comparison",
    "table_rows": "comparison",
    "TABLE_TITLES": "comparison",
    "verdict_counts": "comparison",
    "notable_lines": "comparison",
    "parse_thresholds": "comparison",
    "regressions": "comparison",
    "write_comparison_csv": "comparison",
    "add_differs_column": "differs",
    "differs_html": "differs",
    "differs_lines": "differs",
}
__all__ = [
    "TABLE_TITLES",
    "add_differs_column",
    "compare",
    "comparison_html",
    "correctness_lines",
    "differs_html",
    "differs_lines",
    "notable_lines",
    "parse_thresholds",
    "regressions",
    "table_rows",
    "verdict_counts",
    "write_comparison_csv",
]
__getattr__ = lazy(__name__, _NAMES)
