"""Step 7, from the run folder to a decision: aggregation (medians, deltas), verdicts and the
recommendation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.results.aggregate import (
        OPTIONAL_CONFIG_COLUMNS,
        OPTIONAL_RESULT_COLUMNS,
        REQUIRED_CONFIG_COLUMNS,
        REQUIRED_RESULT_COLUMNS,
        RunData,
        RunFolderError,
        RunMeta,
        Summary,
        compare_runs,
        layout_label,
        load_run,
        round_counts,
        round_problems,
        summarize,
        summarize_run,
        write_compare,
        write_summary,
    )
    from pytest_ppsweep.results.recommendation import (
        Recommendation,
        recommend,
    )
    from pytest_ppsweep.results.verdict import (
        Verdict,
        as_bool,
        judge,
        point_verdict,
        records,
    )

_NAMES = {
    "OPTIONAL_CONFIG_COLUMNS": "aggregate",
    "OPTIONAL_RESULT_COLUMNS": "aggregate",
    "REQUIRED_CONFIG_COLUMNS": "aggregate",
    "REQUIRED_RESULT_COLUMNS": "aggregate",
    "RunData": "aggregate",
    "RunFolderError": "aggregate",
    "RunMeta": "aggregate",
    "Summary": "aggregate",
    "compare_runs": "aggregate",
    "layout_label": "aggregate",
    "load_run": "aggregate",
    "round_counts": "aggregate",
    "round_problems": "aggregate",
    "summarize": "aggregate",
    "summarize_run": "aggregate",
    "write_compare": "aggregate",
    "write_summary": "aggregate",
    "Recommendation": "recommendation",
    "recommend": "recommendation",
    "Verdict": "verdict",
    "as_bool": "verdict",
    "judge": "verdict",
    "point_verdict": "verdict",
    "records": "verdict",
}
__all__ = [
    "OPTIONAL_CONFIG_COLUMNS",
    "OPTIONAL_RESULT_COLUMNS",
    "REQUIRED_CONFIG_COLUMNS",
    "REQUIRED_RESULT_COLUMNS",
    "Recommendation",
    "RunData",
    "RunFolderError",
    "RunMeta",
    "Summary",
    "Verdict",
    "as_bool",
    "compare_runs",
    "judge",
    "layout_label",
    "load_run",
    "point_verdict",
    "recommend",
    "records",
    "round_counts",
    "round_problems",
    "summarize",
    "summarize_run",
    "write_compare",
    "write_summary",
]
__getattr__ = lazy(__name__, _NAMES)
