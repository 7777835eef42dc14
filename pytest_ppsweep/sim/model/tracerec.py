"""The emulator's profile window: Chrome traces of its event-driven scheduler, per rank.

SGLang's ``/start_profile`` wraps the next forward steps of every rank in torch's profiler and each
rank writes ``[<prefix>-]<profile_id>-TP-<t>[-PP-<p>][-EP-<e>].trace.json.gz`` into
``output_dir`` (sglang/srt/managers/scheduler_components/profiler_manager.py). This recorder
writes the same files, in the same Chrome-trace format, from the scheduler's stage steps: what
a stage does with a micro-batch is what the cost model (costmodel.py) charges for it, laid out in
time:

* per layer a GEMM kernel (``cat = "kernel"``) then that layer's share of the
  ``allreduces_per_layer`` all-reduces (``ncclDevKernel_AllReduce_Sum_bf16_RING_LL``), one after
  the other on the same stream: compute and all-reduce never overlap (the seeds' §9.3, ~0);
* after the stage's own work the activation hand-off, and on stage 0 the PP sync before and at
  the start of a step: ``ncclDevKernel_SendRecv`` (the seeds' "Send/Recv plus stage waits",
  §9.3), only when pp > 1.

A rank's window is ``num_steps`` of its own forward steps (micro-batches its stage works on)
from the start, or until ``/stop_profile`` (at most ``MAX_STEPS``). Times are emulated
microseconds. Nothing here sleeps or reads a clock.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .costmodel import BF16_BYTES, CostModel, allreduce_s, stage_s
from .placement import Layout, local_schedulers

MAX_STEPS = 32  # without num_steps, a window of a whole round would be ~1 M events per rank
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
SEND_RECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


def ar_per_layer(layers: int, per_layer: float) -> list[int]:
    """All-reduces of each layer: ``layers × per_layer`` in all, spread evenly (integers)."""
    return [math.floor((i + 1) * per_layer) - math.floor(i * per_layer) for i in range(layers)]


@dataclass
class _Stage:
    steps: int = 0
    done: bool = False
    events: list[tuple[str, float, float]] = field(default_factory=list)  # name, ts_us, dur_us


@dataclass
class TraceRecorder:
    """One profile window; :meth:`step` is called by the scheduler for every stage step."""

    cost: CostModel
    nnodes: int
    output_dir: Path
    profile_id: str
    prefix: str = ""
    num_steps: int | None = None
    skip_nodes: Collection[int] = ()
    on_done: Callable[[list[Path]], None] | None = None
    stages: list[_Stage] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stages = [_Stage() for _ in range(self.cost.layout.pp)]

    @property
    def limit(self) -> int:
        return min(self.num_steps, MAX_STEPS) if self.num_steps else MAX_STEPS

    @property
    def finished(self) -> bool:
        return all(s.done for s in self.stages)

    def step(self, stage: int, t: float, end: float, tokens: int, factor: float,
             sync: float = 0.0) -> None:
        """Record stage ``stage``'s step on a micro-batch of ``tokens`` from emulated time ``t``
        to ``end``; ``sync``: the prefill PP sync at its start (stage 0)."""
        st = self.stages[stage]
        if self.written or st.done or tokens <= 0:
            return
        cost, layout = self.cost, self.cost.layout
        prof = cost.profile
        if stage == 0 and layout.pp > 1 and cost.sync_s() + sync > 0:
            st.events.append((SEND_RECV, (t - cost.sync_s()) * 1e6, (cost.sync_s() + sync) * 1e6))
        at = t + sync
        layers = cost.layers[stage]
        work = stage_s(tokens, layers, layout.tp, prof) * factor
        ar = allreduce_s(tokens * prof.model.hidden_size * BF16_BYTES, layout.tp, prof) * factor
        counts = ar_per_layer(layers, prof.model.allreduces_per_layer) if ar > 0 else [0] * layers
        gemm = max(work - ar * sum(counts), 0.0) / layers
        for c in counts:
            st.events.append((GEMM, at * 1e6, gemm * 1e6))
            at += gemm
            for _ in range(c):
                st.events.append((ALL_REDUCE, at * 1e6, ar * 1e6))
                at += ar
        if layout.pp > 1 and end > at:
            st.events.append((SEND_RECV, at * 1e6, (end - at) * 1e6))
        st.steps += 1
        if st.steps >= self.limit:
            st.done = True
        if self.num_steps and self.finished:
            self.write()

    def write(self) -> list[Path]:
        """Write every rank's trace (once); the files written, by node, skipped nodes excepted."""
        if self.written:
            return self.written
        layout: Layout = self.cost.layout
        self.output_dir.mkdir(parents=True, exist_ok=True)
        for node in range(self.nnodes):
            if node in self.skip_nodes:
                continue
            for ls in local_schedulers(layout, node):
                parts = [self.profile_id, f"TP-{ls.tp_rank}"]
                if layout.pp > 1:
                    parts.append(f"PP-{ls.pp_rank}")
                if layout.ep > 1:
                    parts.append(f"EP-{ls.ep_rank}")
                name = (f"{self.prefix}-" if self.prefix else "") + "-".join(parts)
                path = self.output_dir / f"{name}.trace.json.gz"
                rank = ls.pp_rank * layout.tp + ls.tp_rank
                doc = chrome_trace(self.stages[ls.pp_rank].events, rank, ls.gpu_index, node)
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=5))
                os.replace(tmp, path)
                self.written.append(path)
        if self.on_done is not None:
            self.on_done(self.written)
        if not self.written:
            self.written = [self.output_dir]  # written once, even when every node was skipped
        return self.written


def chrome_trace(
    events: list[tuple[str, float, float]], rank: int, device: int, node: int
) -> dict[str, Any]:
    """torch.profiler's ``export_chrome_trace`` layout for one GPU rank's kernels."""
    trace = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": device,
            "tid": 7,
            "ts": round(ts, 3),
            "dur": round(dur, 3),
            "args": {"device": device, "stream": 7, "correlation": i},
        }
        for i, (name, ts, dur) in enumerate(events)
    ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": device, "name": "SIMULATED GPU"}],
        "distributedInfo": {"backend": "nccl", "rank": rank},
        "traceName": f"ppsweep-sim node {node} rank {rank} (SIMULATED)",
        "displayTimeUnit": "ms",
        "traceEvents": trace,
    }
