"""Step 8, gating an image: noise-aware comparison with a reference run, the pytest-benchmark
export and named baselines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.gate.baselines import (
        BASELINES,
        BaselineError,
        baseline_file,
        resolve,
        save_baseline,
    )
    from pytest_ppsweep.gate.benchjson import (
        BENCHMARK_JSON,
        PB_VERSION,
        TEST_NODE,
        atomic_text,
        benchmark_json,
        load,
        machine_info,
        points,
        stats,
        valid_mask,
        write_benchmark_json,
    )
    from pytest_ppsweep.gate.comparison import (
        DEFAULT_THRESHOLDS,
        FAILING,
        GATE_CSV,
        METRICS,
        VERDICTS,
        Comparison,
        Threshold,
        ThresholdError,
        compare,
        comparison_html,
        comparison_table,
        parse_thresholds,
        regressions,
        write_comparison_csv,
    )

_NAMES = {
    "BASELINES": "baselines",
    "BaselineError": "baselines",
    "baseline_file": "baselines",
    "resolve": "baselines",
    "save_baseline": "baselines",
    "BENCHMARK_JSON": "benchjson",
    "PB_VERSION": "benchjson",
    "TEST_NODE": "benchjson",
    "atomic_text": "benchjson",
    "benchmark_json": "benchjson",
    "load": "benchjson",
    "machine_info": "benchjson",
    "points": "benchjson",
    "stats": "benchjson",
    "valid_mask": "benchjson",
    "write_benchmark_json": "benchjson",
    "Comparison": "comparison",
    "DEFAULT_THRESHOLDS": "comparison",
    "FAILING": "comparison",
    "GATE_CSV": "comparison",
    "METRICS": "comparison",
    "Threshold": "comparison",
    "ThresholdError": "comparison",
    "VERDICTS": "comparison",
    "compare": "comparison",
    "comparison_html": "comparison",
    "comparison_table": "comparison",
    "parse_thresholds": "comparison",
    "regressions": "comparison",
    "write_comparison_csv": "comparison",
}
__all__ = [
    "BASELINES",
    "BENCHMARK_JSON",
    "DEFAULT_THRESHOLDS",
    "FAILING",
    "GATE_CSV",
    "METRICS",
    "PB_VERSION",
    "TEST_NODE",
    "VERDICTS",
    "BaselineError",
    "Comparison",
    "Threshold",
    "ThresholdError",
    "atomic_text",
    "baseline_file",
    "benchmark_json",
    "compare",
    "comparison_html",
    "comparison_table",
    "load",
    "machine_info",
    "parse_thresholds",
    "points",
    "regressions",
    "resolve",
    "save_baseline",
    "stats",
    "valid_mask",
    "write_benchmark_json",
    "write_comparison_csv",
]
__getattr__ = lazy(__name__, _NAMES)
