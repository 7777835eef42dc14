"""The TP domains of a layout: one per distinct TP group, with where its ranks are and a label.

SGLang places global rank ``r`` on node ``r // gpus_per_node``, GPU ``r % gpus_per_node``, and
the TP group of PP stage ``s`` is ranks ``s * tp … s * tp + tp - 1``. Groups that span the same
number of nodes with the same topology label measure the same thing, so only the first of them
(the lowest stage) is run; the domain lists every stage it stands for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_ppsweep.comm.topo import GpuTopology, island_label
from pytest_ppsweep.matrix.model import Cluster, Config

__all__ = ["Domain", "domain_label", "tp_domains"]


@dataclass(frozen=True)
class Domain:
    """One TP group to benchmark: its nodes (cluster positions), local GPUs, label."""

    name: str
    tp: int
    nodes: tuple[int, ...]
    gpus: tuple[int, ...]  # local GPU indices on each of its nodes (the same on every node)
    stages: tuple[int, ...]
    label: str

    @property
    def nproc_per_node(self) -> int:
        return len(self.gpus)

    def where(self, cluster: Cluster) -> str:
        """``node0 (127.0.6.1) GPU0-3`` / ``node0-1 (…) GPU0-7 each``."""
        hosts = ", ".join(cluster.hosts[n].name for n in self.nodes)
        span = f"GPU{self.gpus[0]}-{self.gpus[-1]}" if len(self.gpus) > 1 else f"GPU{self.gpus[0]}"
        return f"{hosts}: {span}" + (" each" if len(self.nodes) > 1 else "")


def domain_label(cluster: Cluster, nodes: tuple[int, ...], gpus: tuple[int, ...],
                 topos: Mapping[int, GpuTopology]) -> str:
    """``same node`` / ``N nodes`` from the cluster; on one node, with ``topo -m`` of that node,
    also ``same PCIe/NUMA island`` or ``across N NUMA islands``."""
    if len(nodes) > 1:
        return f"{len(nodes)} nodes"
    topo = topos.get(nodes[0])
    if topo is None or len(gpus) < 2:
        return "same node"
    return f"same node, {island_label(topo, gpus)}"


def tp_domains(config: Config, cluster: Cluster,
               topos: Mapping[int, GpuTopology] | None = None) -> list[Domain]:
    """The distinct TP domains of ``config`` on ``cluster`` (none when TP is 1: no all-reduce)."""
    group = config.deployment.serve_group
    if group.tp < 2:
        return []
    gpn = cluster.gpus_per_node
    topos = topos or {}
    found: dict[tuple[int, str], tuple[tuple[int, ...], tuple[int, ...], list[int]]] = {}
    for stage in range(group.pp):
        ranks = range(stage * group.tp, (stage + 1) * group.tp)
        nodes = tuple(sorted({r // gpn for r in ranks}))
        gpus = tuple(sorted({r % gpn for r in ranks}))
        key = (len(nodes), domain_label(cluster, nodes, gpus, topos))
        if key in found:
            found[key][2].append(stage)
        else:
            found[key] = (nodes, gpus, [stage])
    several = len(found) > 1
    out = []
    for (_, label), (nodes, gpus, stages) in found.items():
        name = f"tp{group.tp}" + (f"-s{stages[0]}" if several else "")
        out.append(Domain(name, group.tp, nodes, gpus, tuple(stages), label))
    return out
