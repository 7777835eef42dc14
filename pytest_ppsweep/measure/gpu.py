"""GPU memory as measured: the four moments of a layout and the worst-rank rule (the nodes' GPUs
are asked by the cluster layer, :mod:`pytest_ppsweep.cluster.gpus`; the snapshots themselves and
their cache are :mod:`pytest_ppsweep.measure.snapshots`).

The plugin asks every node for ``--query-gpu=index,memory.used,memory.total`` at four moments
(before boot, healthy, after the benchmark, after cleanup).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_ppsweep.cluster.gpus import GpuMemory

MOMENTS = ("before", "healthy", "after", "cleaned")


@dataclass(frozen=True)
class WorstRank:
    """The GPU with the highest memory use across all nodes at one moment."""

    node: str
    index: int
    used_mib: int
    total_mib: int

    @property
    def headroom_mib(self) -> int:
        return self.total_mib - self.used_mib


def worst_of(ranks: Iterable[WorstRank]) -> WorstRank | None:
    """The most loaded of ``ranks`` (the most memory used; on a tie, the lower GPU index, then
    the first): the one home of the worst-rank rule, over GPUs and over a layout's groups."""
    return max(ranks, key=lambda w: (w.used_mib, -w.index), default=None)


def worst_rank(gpus: Iterable[GpuMemory]) -> WorstRank | None:
    """The most loaded GPU (seed §8: the worst rank decides whether a layout fits)."""
    return worst_of(WorstRank(g.node, g.index, g.used_mib, g.total_mib) for g in gpus)


def not_released(
    before: Iterable[GpuMemory], cleaned: Iterable[GpuMemory], slack_mib: int = 512
) -> list[str]:
    """GPUs whose memory after cleanup is above its before-boot level (a leftover process)."""
    base = {(g.node, g.index): g.used_mib for g in before}
    return [
        f"{g.node} GPU {g.index}: {g.used_mib} MiB after cleanup vs "
        f"{base[(g.node, g.index)]} MiB before"
        for g in cleaned
        if (g.node, g.index) in base and g.used_mib > base[(g.node, g.index)] + slack_mib
    ]
