"""Where SGLang puts PP stages and TP ranks across nodes, and the log prefix of each scheduler.

Follows SGLang's ``_launch_subprocesses`` (contract §3.1): ``pp_size_per_node = max(pp/nnodes, 1)``,
``nnodes_per_pp_rank = max(nnodes/pp, 1)``; node ``r`` hosts PP ranks
``[pp_per_node*(r//nnodes_per_pp_rank), +pp_per_node)`` and TP ranks
``[tp_per_node*(r % nnodes_per_pp_rank), +tp_per_node)``; ``moe_ep_rank = tp_rank // (tp/ep)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """The parallel layout of one service."""

    tp: int
    pp: int
    ep: int
    nnodes: int

    @property
    def world_size(self) -> int:
        """Number of GPU workers (tp x pp; no DP in this emulator)."""
        return self.tp * self.pp

    @property
    def pp_per_node(self) -> int:
        """PP stages hosted by one node."""
        return max(self.pp // self.nnodes, 1)

    @property
    def nnodes_per_pp_rank(self) -> int:
        """Nodes that one PP stage spans."""
        return max(self.nnodes // self.pp, 1)

    @property
    def tp_per_node(self) -> int:
        """TP ranks of one stage hosted by one node."""
        return self.tp // self.nnodes_per_pp_rank

    @property
    def gpus_per_node(self) -> int:
        """GPUs the launch takes on every node: ``pp_per_node x tp_per_node``, which is SGLang's
        tp x pp / nnodes (its check_server_args asserts the division), GPUs ``0 .. n-1``
        (``gpu_id = base_gpu_id + (pp_rank % pp_per_node) * tp_per_node + tp_rank % tp_per_node``,
        sglang/srt/entrypoints/engine.py). The rest of the node's GPUs stay idle."""
        return self.pp_per_node * self.tp_per_node


@dataclass(frozen=True)
class LocalScheduler:
    """One scheduler process (one GPU) on a node."""

    pp_rank: int
    tp_rank: int
    ep_rank: int
    gpu_index: int

    def prefix(self, layout: Layout) -> str:
        """The ``PP2 TP5 EP5`` part of the log prefix (a part only when that size > 1)."""
        parts = []
        if layout.pp > 1:
            parts.append(f"PP{self.pp_rank}")
        if layout.tp > 1:
            parts.append(f"TP{self.tp_rank}")
        if layout.ep > 1:
            parts.append(f"EP{self.ep_rank}")
        return " ".join(parts)


def local_schedulers(layout: Layout, node_rank: int) -> list[LocalScheduler]:
    """The schedulers running on ``node_rank``, in GPU order."""
    pp_start = layout.pp_per_node * (node_rank // layout.nnodes_per_pp_rank)
    tp_start = layout.tp_per_node * (node_rank % layout.nnodes_per_pp_rank)
    ep_div = max(layout.tp // max(layout.ep, 1), 1)
    out: list[LocalScheduler] = []
    gpu = 0
    for pp_rank in range(pp_start, pp_start + layout.pp_per_node):
        for tp_rank in range(tp_start, tp_start + layout.tp_per_node):
            out.append(LocalScheduler(pp_rank, tp_rank, tp_rank // ep_div, gpu))
            gpu += 1
    return out


def stage_first_node(layout: Layout, pp_rank: int) -> int:
    """The lowest node rank hosting ``pp_rank``."""
    return (pp_rank // layout.pp_per_node) * layout.nnodes_per_pp_rank


def boundary_crosses_nodes(layout: Layout, pp_rank: int) -> bool:
    """Whether the hand-off from stage ``pp_rank`` to ``pp_rank + 1`` leaves the node."""
    if layout.nnodes_per_pp_rank > 1:
        return True
    return stage_first_node(layout, pp_rank) != stage_first_node(layout, pp_rank + 1)


def stage_layers(num_layers: int, pp: int) -> list[int]:
    """Decoder layers per PP stage.

    Layers are split evenly; the remainder goes to the middle stages first, because the first
    stage also holds the embedding and the last the lm-head (keeps the heaviest stage lighter).
    """
    base, extra = divmod(num_layers, pp)
    counts = [base] * pp
    order = [*range(1, pp - 1), pp - 1, 0] if pp > 2 else list(range(pp))
    for i in order[:extra]:
        counts[i] += 1
    return counts
