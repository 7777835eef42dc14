"""Boot-time model: how long each start-up phase of a rank takes, in emulated seconds.

    launch      = launch_s                                   imports, arg resolution, tokenizer
    dist_init   = dist_init_s + dist_init_per_node_s * nnodes   NCCL/Gloo communicators
    load        = max over nodes (weight bytes on the node) / disk_read_gbs
    kv_alloc    = kv_alloc_s
    graph       = graph_capture_s_per_layer * max layers per stage   (0 with the decode graph off)
    warmup_jit  = warmup_jit_s_per_stage * pp    first forward JIT/autotune, stage after stage

Stages load and capture in parallel, but the collectives at the end of every phase make all
ranks wait for the slowest node, hence the ``max``. With the kimi-k3-6000d profile this gives
~380-510 s, PP16 the slowest (seeds §6: 338-538 s; PP16 538 s with the decode graph disabled).
"""

from __future__ import annotations

from dataclasses import dataclass

from .gpumem import GB, MemoryPlan
from .placement import local_schedulers


@dataclass(frozen=True)
class BootPlan:
    """Durations of the start-up phases (emulated seconds)."""

    launch_s: float
    dist_init_s: float
    load_s: float
    kv_alloc_s: float
    graph_s: float
    warmup_jit_s: float

    @property
    def total_s(self) -> float:
        """Sum of the phases (without the warmup request's own pipeline time)."""
        return (
            self.launch_s
            + self.dist_init_s
            + self.load_s
            + self.kv_alloc_s
            + self.graph_s
            + self.warmup_jit_s
        )


def plan_boot(mem: MemoryPlan) -> BootPlan:
    """Phase durations for the layout and memory plan ``mem``."""
    profile, layout = mem.profile, mem.layout
    boot = profile.boot
    node_bytes = max(
        sum(mem.weights_bytes(s.pp_rank) for s in local_schedulers(layout, node))
        for node in range(layout.nnodes)
    )
    graph = boot.graph_capture_s_per_layer * max(mem.layers) if mem.decode_graph else 0.0
    return BootPlan(
        launch_s=boot.launch_s,
        dist_init_s=boot.dist_init_s + boot.dist_init_per_node_s * layout.nnodes,
        load_s=node_bytes / (boot.disk_read_gbs * GB),
        kv_alloc_s=boot.kv_alloc_s,
        graph_s=graph,
        warmup_jit_s=boot.warmup_jit_s_per_stage * layout.pp,
    )
