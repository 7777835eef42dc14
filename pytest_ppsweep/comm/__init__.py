"""The all-reduce microbenchmark per TP domain (seeds §9.2): which TP groups a layout has and how
far each spans (cluster description, ``nvidia-smi topo -m``), a self-contained torch worker
shipped to the nodes (``allreduce_worker.py``, never imported here) or nccl-tests'
``all_reduce_perf``, their output parsed, failures named by node and rank, results in the run
folder (``comm.csv``, ``comm_summary.csv``) and the §9.2 table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.comm.domains import (
        Domain,
        domain_label,
        tp_domains,
    )
    from pytest_ppsweep.comm.ncclperf import (
        NcclPerfError,
        PerfRow,
        parse_all_reduce_perf,
    )
    from pytest_ppsweep.comm.records import (
        CommOutput,
        read_lines,
        read_output,
    )
    from pytest_ppsweep.comm.runner import (
        COMM_COLUMNS,
        WORKER,
        CommFailed,
        DomainRun,
        run_comm,
        save_smi_q,
        worker_argv,
    )
    from pytest_ppsweep.comm.smiq import (
        SmiGpu,
        SmiQ,
        SmiQError,
        node_line,
        parse_smi_q,
    )
    from pytest_ppsweep.comm.table import (
        AT_128M,
        AT_256M,
        SUMMARY_COLUMNS,
        curves,
        summary_rows,
    )
    from pytest_ppsweep.comm.topo import (
        GpuTopology,
        TopoError,
        island_label,
        parse_topo,
    )

_NAMES = {
    "Domain": "domains",
    "domain_label": "domains",
    "tp_domains": "domains",
    "NcclPerfError": "ncclperf",
    "PerfRow": "ncclperf",
    "parse_all_reduce_perf": "ncclperf",
    "CommOutput": "records",
    "read_lines": "records",
    "read_output": "records",
    "COMM_COLUMNS": "runner",
    "CommFailed": "runner",
    "DomainRun": "runner",
    "WORKER": "runner",
    "run_comm": "runner",
    "save_smi_q": "runner",
    "worker_argv": "runner",
    "SmiGpu": "smiq",
    "SmiQ": "smiq",
    "SmiQError": "smiq",
    "node_line": "smiq",
    "parse_smi_q": "smiq",
    "AT_128M": "table",
    "AT_256M": "table",
    "SUMMARY_COLUMNS": "table",
    "curves": "table",
    "summary_rows": "table",
    "GpuTopology": "topo",
    "TopoError": "topo",
    "island_label": "topo",
    "parse_topo": "topo",
}
__all__ = [
    "AT_128M",
    "AT_256M",
    "COMM_COLUMNS",
    "SUMMARY_COLUMNS",
    "WORKER",
    "CommFailed",
    "CommOutput",
    "Domain",
    "DomainRun",
    "GpuTopology",
    "NcclPerfError",
    "PerfRow",
    "SmiGpu",
    "SmiQ",
    "SmiQError",
    "TopoError",
    "curves",
    "domain_label",
    "island_label",
    "node_line",
    "parse_all_reduce_perf",
    "parse_smi_q",
    "parse_topo",
    "read_lines",
    "read_output",
    "run_comm",
    "save_smi_q",
    "summary_rows",
    "tp_domains",
    "worker_argv",
]
__getattr__ = lazy(__name__, _NAMES)
