"""Which node writes which rank's trace, and the file that is that rank's trace: the engine's
placement of ranks on nodes and its profiler's file names (engine/; for SGLang, its
``_launch_subprocesses`` and profiler_manager.py).
"""

from __future__ import annotations

from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import engine_of


def node_ranks(pp: int, tp: int, nnodes: int, node: int,
               engine: Engine | None = None) -> list[tuple[int, int]]:
    """The (pp_rank, tp_rank) pairs node ``node`` runs."""
    return (engine or engine_of()).node_ranks(pp, tp, nnodes, node)


def rank_name(pp_rank: int, tp_rank: int, pp: int, engine: Engine | None = None) -> str:
    """What the trace file of that rank is named after (``TP-1-PP-0`` for SGLang)."""
    return (engine or engine_of()).trace_rank_name(pp_rank, tp_rank, pp)


def rank_of(filename: str, pp: int, engine: Engine | None = None) -> tuple[int, int] | None:
    """(pp_rank, tp_rank) of a trace file name; None when it is not a rank's trace."""
    return (engine or engine_of()).trace_rank_of(filename, pp)
