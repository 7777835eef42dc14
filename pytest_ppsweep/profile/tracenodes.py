"""Which node writes which rank's trace, and the file that is that rank's trace.

SGLang places ranks on nodes as ``_launch_subprocesses`` does (sglang/srt/entrypoints/engine.py):
``pp_size_per_node = max(pp // nnodes, 1)``, ``nnodes_per_pp_rank = max(nnodes // pp, 1)``,
``tp_size_per_node = tp // nnodes_per_pp_rank``; node ``n`` runs PP ranks from
``pp_size_per_node × (n // nnodes_per_pp_rank)`` and TP ranks from
``tp_size_per_node × (n % nnodes_per_pp_rank)``. Each rank's profiler writes
``[<prefix>-]<profile_id>-TP-<t>[-DP-<d>][-PP-<p>][-EP-<e>].trace.json.gz``
(sglang/srt/managers/scheduler_components/profiler_manager.py).
"""

from __future__ import annotations

import re

_TP = re.compile(r"-TP-(\d+)")
_PP = re.compile(r"-PP-(\d+)")


def node_ranks(pp: int, tp: int, nnodes: int, node: int) -> list[tuple[int, int]]:
    """The (pp_rank, tp_rank) pairs node ``node`` runs."""
    pp_per_node = max(pp // nnodes, 1)
    nodes_per_pp = max(nnodes // pp, 1)
    tp_per_node = tp // nodes_per_pp
    pp0 = pp_per_node * (node // nodes_per_pp)
    tp0 = tp_per_node * (node % nodes_per_pp)
    return [(p, t) for p in range(pp0, pp0 + pp_per_node) for t in range(tp0, tp0 + tp_per_node)]


def rank_name(pp_rank: int, tp_rank: int, pp: int) -> str:
    """``TP-1-PP-0`` (``TP-1`` when pp = 1), as in SGLang's file names."""
    return f"TP-{tp_rank}" + (f"-PP-{pp_rank}" if pp > 1 else "")


def rank_of(filename: str, pp: int) -> tuple[int, int] | None:
    """(pp_rank, tp_rank) of a trace file name; None when it is not a rank's trace."""
    tp = _TP.search(filename)
    if tp is None or not filename.endswith((".trace.json.gz", ".trace.json")):
        return None
    pr = _PP.search(filename)
    if pp > 1 and pr is None:
        return None
    return (int(pr.group(1)) if pr else 0), int(tp.group(1))
