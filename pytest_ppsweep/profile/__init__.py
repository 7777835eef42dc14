"""Step 4b, where the time goes: the profile window (SGLang's /start_profile and /stop_profile
around one extra round), the traces collected from every node, and the attribution parser of
torch-profiler Chrome traces (collective calls by kind, cumulative time, p50, exposed
communication, overlap) per rank and per layout; usable standalone (``python -m
pytest_ppsweep.profile TRACE…``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.profile.__main__ import (
        main,
    )
    from pytest_ppsweep.profile.attribution import (
        STABLE_CALLS_FACTOR,
        TABLE_KINDS,
        LayoutProfile,
        aggregate,
        stable_ranks,
        table_rows,
    )
    from pytest_ppsweep.profile.collect import (
        POLL_S,
        ProfileError,
        collect_traces,
        missing_ranks,
        remote_dir,
        with_profile_mounts,
    )
    from pytest_ppsweep.profile.placement import (
        node_ranks,
        rank_name,
        rank_of,
    )
    from pytest_ppsweep.profile.summary import (
        COLUMNS,
        CSV_NAME,
        layout_dir,
        load_layouts,
        write_layout,
        write_table,
    )
    from pytest_ppsweep.profile.trace import (
        KINDS,
        NCCL_PREFIXES,
        RankProfile,
        TraceError,
        collective,
        intersection,
        kind_of,
        length,
        parse,
        rank_label,
        read_events,
        trace_files,
        union,
    )
    from pytest_ppsweep.profile.window import (
        START_TIMEOUT_S,
        STOP_TIMEOUT_S,
        request_body,
        start,
        stop,
    )

_NAMES = {
    "main": "__main__",
    "LayoutProfile": "attribution",
    "STABLE_CALLS_FACTOR": "attribution",
    "TABLE_KINDS": "attribution",
    "aggregate": "attribution",
    "stable_ranks": "attribution",
    "table_rows": "attribution",
    "POLL_S": "collect",
    "ProfileError": "collect",
    "collect_traces": "collect",
    "missing_ranks": "collect",
    "remote_dir": "collect",
    "with_profile_mounts": "collect",
    "node_ranks": "placement",
    "rank_name": "placement",
    "rank_of": "placement",
    "COLUMNS": "summary",
    "CSV_NAME": "summary",
    "layout_dir": "summary",
    "load_layouts": "summary",
    "write_layout": "summary",
    "write_table": "summary",
    "KINDS": "trace",
    "NCCL_PREFIXES": "trace",
    "RankProfile": "trace",
    "TraceError": "trace",
    "collective": "trace",
    "intersection": "trace",
    "kind_of": "trace",
    "length": "trace",
    "parse": "trace",
    "rank_label": "trace",
    "read_events": "trace",
    "trace_files": "trace",
    "union": "trace",
    "START_TIMEOUT_S": "window",
    "STOP_TIMEOUT_S": "window",
    "request_body": "window",
    "start": "window",
    "stop": "window",
}
__all__ = [
    "COLUMNS",
    "CSV_NAME",
    "KINDS",
    "NCCL_PREFIXES",
    "POLL_S",
    "STABLE_CALLS_FACTOR",
    "START_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "TABLE_KINDS",
    "LayoutProfile",
    "ProfileError",
    "RankProfile",
    "TraceError",
    "aggregate",
    "collect_traces",
    "collective",
    "intersection",
    "kind_of",
    "layout_dir",
    "length",
    "load_layouts",
    "main",
    "missing_ranks",
    "node_ranks",
    "parse",
    "rank_label",
    "rank_name",
    "rank_of",
    "read_events",
    "remote_dir",
    "request_body",
    "stable_ranks",
    "start",
    "stop",
    "table_rows",
    "trace_files",
    "union",
    "with_profile_mounts",
    "write_layout",
    "write_table",
]
__getattr__ = lazy(__name__, _NAMES)
