"""Step 4, measuring a booted layout: workload, load generator (bench), round metrics and the N/N
rule, GPU snapshots, and the run folder the results are written to as produced (runstore).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.measure.bench import (
        RECORD_KEYS,
        BenchSetupError,
        make_session,
        run_round_sync,
    )
    from pytest_ppsweep.measure.completion import (
        Shortfall,
        counts,
        result_problems,
        round_problems,
        row_problems,
    )
    from pytest_ppsweep.measure.gpu import (
        MOMENTS,
        QUERY_ARGS,
        QUERY_FIELDS,
        GpuMemory,
        SmiParseError,
        WorstRank,
        not_released,
        parse_query_gpu,
        worst_rank,
    )
    from pytest_ppsweep.measure.metrics import (
        ROW_KEYS,
        Record,
        RoundResult,
        RowValue,
        summarize,
    )
    from pytest_ppsweep.measure.runstore import (
        CONFIG_COLUMNS,
        RESULT_COLUMNS,
        RunStore,
        new_run_id,
    )
    from pytest_ppsweep.measure.workload import (
        APIS,
        Prompt,
        PromptSet,
        WorkloadSpec,
        generate_prompts,
        make_prompts,
        prompt_digest,
        request_body,
    )

_NAMES = {
    "BenchSetupError": "bench",
    "RECORD_KEYS": "bench",
    "make_session": "bench",
    "run_round_sync": "bench",
    "Shortfall": "completion",
    "counts": "completion",
    "result_problems": "completion",
    "round_problems": "completion",
    "row_problems": "completion",
    "GpuMemory": "gpu",
    "MOMENTS": "gpu",
    "QUERY_ARGS": "gpu",
    "QUERY_FIELDS": "gpu",
    "SmiParseError": "gpu",
    "WorstRank": "gpu",
    "not_released": "gpu",
    "parse_query_gpu": "gpu",
    "worst_rank": "gpu",
    "ROW_KEYS": "metrics",
    "Record": "metrics",
    "RoundResult": "metrics",
    "RowValue": "metrics",
    "summarize": "metrics",
    "CONFIG_COLUMNS": "runstore",
    "RESULT_COLUMNS": "runstore",
    "RunStore": "runstore",
    "new_run_id": "runstore",
    "APIS": "workload",
    "Prompt": "workload",
    "PromptSet": "workload",
    "WorkloadSpec": "workload",
    "generate_prompts": "workload",
    "make_prompts": "workload",
    "prompt_digest": "workload",
    "request_body": "workload",
}
__all__ = [
    "APIS",
    "CONFIG_COLUMNS",
    "MOMENTS",
    "QUERY_ARGS",
    "QUERY_FIELDS",
    "RECORD_KEYS",
    "RESULT_COLUMNS",
    "ROW_KEYS",
    "BenchSetupError",
    "GpuMemory",
    "Prompt",
    "PromptSet",
    "Record",
    "RoundResult",
    "RowValue",
    "RunStore",
    "Shortfall",
    "SmiParseError",
    "WorkloadSpec",
    "WorstRank",
    "counts",
    "generate_prompts",
    "make_prompts",
    "make_session",
    "new_run_id",
    "not_released",
    "parse_query_gpu",
    "prompt_digest",
    "request_body",
    "result_problems",
    "round_problems",
    "row_problems",
    "run_round_sync",
    "summarize",
    "worst_rank",
]
__getattr__ = lazy(__name__, _NAMES)
