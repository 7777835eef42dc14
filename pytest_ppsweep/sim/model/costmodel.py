"""Parametric cost model of prefill/decode micro-batches on an SGLang PP x TP layout.

The emulated scheduler (sim/model/scheduler.py) runs the pipeline event by event: each stage
works on one micro-batch at a time and hands it on; stage 0 forms micro-batch ``i`` once it is
free and slot ``i % pp``'s previous micro-batch has left the last stage, after the fixed PP sync.
What one micro-batch of ``n`` tokens costs on stage ``s`` (:meth:`CostModel.stage_step_s`)::

    T_step(n, s) = T_stage(n, s) + handoff(n) [s < pp - 1]
                 + stage_sync * (pp - 1) * pp - sync_base * (pp - 1)   [s = 0, prefill]
    before stage 0 forms a micro-batch:  sync_base * (pp - 1)

    T_stage(n, s) = compute(n, s) + layers_s * a * allreduce(n * hidden * 2 bytes, tp)
    compute(n, s) = max(n / N_ref * K * layers_s / L / tp * (1 + (tp / n_half) ** gamma),
                        layers_s * min_layer)
    allreduce(B, tp) = 2 (tp - 1) * step_latency + 2 (tp - 1) / tp * B / busbw(domain(tp))
    handoff(n) = n * hidden * 2 / p2p_bw + p2p_latency (the slowest stage boundary's link)
    domain(tp) = PCIe island if tp <= gpus_per_pcie_island, one node if tp <= gpus_per_node,
                 else ceil(tp / gpus_per_node) nodes (RoCE)

A prefill micro-batch's PP sync is thus ``stage_sync * (pp - 1) * pp`` in all, paid on stage 0,
which forms the micro-batches: the pipeline's pace is its slowest stage (often stage 0 at
PP16), its latency the sum of the stages, not ``pp`` times the slowest one.

Parameters (profile TOML, sections in brackets) and where their values come from:

* ``L`` [model.num_layers] = 61 and ``hidden`` [model.hidden_size] = 7168: the model card.
* ``layers_s``: layers on stage ``s`` (placement.stage_layers; uneven when pp does not divide L,
  so the heaviest stage sets the pace, a real PP effect).
* ``a`` [model.allreduces_per_layer] = 3.28: ~200 all-reduces per chunk for the whole model,
  from the seeds' PP1 Nsight profile (557 AR per window, p50 7.10 ms, ~0 overlap).
* ``K`` [compute.chunk_gpu_seconds] = 8.83: GPU-seconds of one ``N_ref``-token chunk (8192)
  through the whole model at ideal efficiency; ``n_half`` = 2.17, ``gamma`` = 0.504 [compute]:
  the small-GEMM efficiency loss (per-GPU GEMM width shrinks as 1/tp). K, n_half, gamma and
  stage_sync were fitted together to the seeds' §7 table, Input TPS and TTFT p50 and p95 (the
  planner's Levenberg-Marquardt, planner/fitting.py, on planner/roundcost.py, which mirrors this
  model; log errors weighted 1/0.02, 1/0.02, 1/0.015; bus bandwidth, latency and P2P held at
  the values below); with them the virtual-time benchmark of sim/model/vbench.py (median of
  three seeded rounds) gives every point of the table within 5 %: Input TPS within 2.0 %, TTFT
  p50 within 4.4 %, TTFT p95 within 4.6 % (benchmarks/bench_sim_seeds.py,
  tests/sim/model/test_costmodel.py). K and n_half trade against each other along a shallow
  valley (the table has one TP per PP): their values are a fit, not measurements.
* ``busbw``/``step_latency`` [network]: the seeds' §9.2 nccl all_reduce_perf at 128 MiB:
  TP4 4.93 ms (one PCIe island), TP8 6.00 ms (one node), TP16 6.24 ms, TP32 6.59 ms; ring
  busbw ~39-41 GB/s on every level. TP2 is an extrapolation of the same ring formula (~3.3 ms).
* ``stage_sync`` [scheduler.stage_sync_ms] = 2.71 ms: per stage boundary and per micro-batch
  slot, per prefill micro-batch. SGLang's PP loop (``event_loop_pp``, scheduler_pp_mixin.py) runs
  ``pp`` micro-batch slots; for each, the requests and the previous slot's outputs travel from
  stage to stage as Python objects over Gloo, and stage 0 takes a slot's outputs before it
  reuses the slot (sgl-project/sglang#11857: the loop still has bubbles). The sync grows with
  the boundaries (pp - 1) and the slots whose state is relayed (pp): ``(pp - 1) * pp``. Where it
  is paid is an assumption fitted to the seeds' table: on stage 0, as part of forming a
  micro-batch. Paid on every stage at every step (the lock-step schedule this replaced), it
  made PP16's latency 16 times its pace: TTFT p95 +27 % at C=8, p50 -11 % at C=16;
  on stage 0 it limits the pace (Input TPS) but adds to the latency once. A sync linear in
  pp - 1 could not give both PP2-PP8 (little sync) and the PP8 -> PP16 regression.
* ``p2p_bw``/``p2p_latency`` [network]: PCIe Gen5 within a node, 400G RoCE between nodes.
* Per-micro-batch jitter ``jitter_frac`` [scheduler] (Gaussian, seeded; on the work, not the
  sync) gives the seeds' < 0.7 % spread.

Decode and the MoE all-to-all backends (the [moe] section and the keys named below):

* ``compute(n, s)``'s floor is ``layers_s * min_layer + weight_read(n, s)``: a decode step is
  memory-bound; it reads the stage's dense weights and the share ``1 - (1 - k/E)^n`` of its
  routed experts that ``n`` tokens touch, at [gpu.hbm_effective_gbs]. This is what makes TPOT
  grow with the tokens of a decode micro-batch (C / pp), and it is far below prefill's compute.
* The PP sync is the fitted ``stage_sync_ms * (pp - 1) * pp`` for a prefill micro-batch (its
  objects carry input ids, extend lengths, prefix indices), but only ``stage_sync_base_ms *
  (pp - 1)`` for a decode or empty one (next-token ids): a request's next token waits for its
  slot's turn (``pp`` micro-batches formed, each behind that cheap sync) and crosses the ``pp``
  stages, not ``pp`` prefill-sized syncs.
* With ``--moe-a2a-backend`` other than ``none`` the per-layer MoE all-reduce
  ([moe.moe_allreduces_per_layer]) is replaced by a dispatch and a combine all-to-all over the EP
  group: each rank sends its ``n / ep`` tokens to ``min(k, ep)`` ranks, ``(ep - 1) / ep`` of them
  remote, over PCIe peer-to-peer within a node, RoCE beyond (there is no NVLink on this box;
  DeepEP's intranode kernels expect it, so this is the optimistic case), plus
  [moe.a2a_latency_us] per collective. Payload: DeepEP dispatches FP8 (hidden + 4 bytes per 128
  scales), FlashInfer and the others bf16 plus top-k ids/weights; combine is bf16.

Changing one physical parameter moves every layout; nothing is keyed by a configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .placement import Layout, boundary_crosses_nodes, stage_layers
from .profile import Profile

BF16_BYTES = 2


def domain_of(tp: int, profile: Profile) -> tuple[str, int]:
    """How far a TP group of ``tp`` GPUs spans: (``island``|``node``|``multinode``, nodes)."""
    gpu = profile.gpu
    if tp <= gpu.gpus_per_pcie_island:
        return "island", 1
    if tp <= gpu.gpus_per_node:
        return "node", 1
    return "multinode", math.ceil(tp / gpu.gpus_per_node)


def allreduce_s(nbytes: float, tp: int, profile: Profile) -> float:
    """Ring all-reduce time of ``nbytes`` over ``tp`` GPUs (0 when tp == 1)."""
    if tp <= 1:
        return 0.0
    net = profile.network
    level, _ = domain_of(tp, profile)
    busbw = {
        "island": net.busbw_pcie_island_gbs,
        "node": net.busbw_node_gbs,
        "multinode": net.busbw_multinode_gbs,
    }[level]
    steps = 2 * (tp - 1)
    return steps * net.ar_step_latency_us * 1e-6 + steps / tp * nbytes / (busbw * 1e9)


def efficiency_factor(tp: int, profile: Profile) -> float:
    """GEMM slowdown from splitting the matrices ``tp`` ways: 1 + (tp / n_half) ** gamma."""
    c = profile.compute
    return 1.0 + float((tp / c.n_half) ** c.gamma)


def compute_s(tokens: int, layers: int, tp: int, profile: Profile) -> float:
    """Per-GPU compute of ``tokens`` through ``layers`` layers with TP ``tp``."""
    c = profile.compute
    ideal = (
        tokens / c.reference_chunk_tokens * c.chunk_gpu_seconds * layers / profile.model.num_layers
    )
    floor = layers * c.min_layer_ms * 1e-3 + weight_read_s(tokens, layers, tp, profile)
    return max(ideal / tp * efficiency_factor(tp, profile), floor)


def stage_s(
    tokens: int, layers: int, tp: int, profile: Profile, *, a2a: str = "none", ep: int = 1
) -> float:
    """One stage's work on a micro-batch of ``tokens``: compute + exposed collectives."""
    if tokens <= 0:
        return 0.0
    act_bytes = tokens * profile.model.hidden_size * BF16_BYTES
    n_ar = layers * profile.model.allreduces_per_layer
    moe = 0.0
    if uses_a2a(a2a, profile):
        n_ar -= layers * profile.moe.moe_allreduces_per_layer
        moe = layers * a2a_s(tokens, ep, profile, a2a)
    return compute_s(tokens, layers, tp, profile) + n_ar * allreduce_s(act_bytes, tp, profile) + moe


def uses_a2a(backend: str, profile: Profile) -> bool:
    """True when an all-to-all backend is on and the model has routed experts."""
    return backend != "none" and profile.moe.num_experts > 0


def touched_expert_share(tokens: int, profile: Profile) -> float:
    """Expected share of the routed experts ``tokens`` tokens touch (1 for a dense model)."""
    moe = profile.moe
    if moe.num_experts <= 0:
        return 1.0
    return 1.0 - (1.0 - moe.experts_per_token / moe.num_experts) ** tokens


def weight_read_s(tokens: int, layers: int, tp: int, profile: Profile) -> float:
    """Time to read the weights a step of ``tokens`` uses on one GPU (memory-bound decode)."""
    m = profile.model
    per_layer_gb = (m.weight_gb_total - m.embedding_gb - m.lm_head_gb) / m.num_layers
    frac = profile.moe.expert_weight_fraction
    share = (1.0 - frac) + frac * touched_expert_share(tokens, profile)
    return per_layer_gb * layers / tp * share / profile.gpu.hbm_effective_gbs


def a2a_s(tokens: int, ep: int, profile: Profile, backend: str) -> float:
    """One MoE layer's dispatch + combine all-to-all of ``tokens`` over an EP group of ``ep``."""
    if ep <= 1:
        return 0.0
    hidden, moe, net = profile.model.hidden_size, profile.moe, profile.network
    if backend == "deepep":
        dispatch = hidden + hidden // 128 * 4  # FP8 + per-128 scales
    else:
        dispatch = hidden * BF16_BYTES + moe.experts_per_token * 8  # bf16 + top-k ids/weights
    combine = hidden * BF16_BYTES
    nbytes = tokens / ep * min(moe.experts_per_token, ep) * (dispatch + combine) * (ep - 1) / ep
    level, _ = domain_of(ep, profile)
    bw = net.p2p_inter_node_gbs if level == "multinode" else net.p2p_intra_node_gbs
    return nbytes / (bw * 1e9) + 2 * moe.a2a_latency_us * 1e-6


@dataclass(frozen=True)
class CostModel:
    """The cost model bound to one profile and layout (precomputes the stage split)."""

    profile: Profile
    layout: Layout
    moe_a2a_backend: str = "none"

    @property
    def layers(self) -> list[int]:
        """Layers per stage."""
        return stage_layers(self.profile.model.num_layers, self.layout.pp)

    def sync_s(self) -> float:
        """The fixed PP sync, paid before stage 0 forms each micro-batch (decode and empty ones
        pay only this)."""
        return self.profile.scheduler.stage_sync_base_ms * 1e-3 * (self.layout.pp - 1)

    def sync_prefill_s(self, prefill: bool) -> float:
        """The rest of the PP sync for a prefill micro-batch, on stage 0: each of the ``pp - 1``
        stage boundaries relays the state of the ``pp`` micro-batch slots, so the whole prefill
        sync is ``stage_sync * (pp - 1) * pp`` (see the module docstring)."""
        if not prefill:
            return 0.0
        sched = self.profile.scheduler
        pp = self.layout.pp
        return (sched.stage_sync_ms * pp - sched.stage_sync_base_ms) * 1e-3 * (pp - 1)

    def handoff_s(self, tokens: int) -> float:
        """Activation transfer to the next stage (slowest boundary), 0 for pp == 1."""
        if self.layout.pp <= 1 or tokens <= 0:
            return 0.0
        net = self.profile.network
        nbytes = tokens * self.profile.model.hidden_size * BF16_BYTES
        crosses = any(boundary_crosses_nodes(self.layout, p) for p in range(self.layout.pp - 1))
        bw = net.p2p_inter_node_gbs if crosses else net.p2p_intra_node_gbs
        return nbytes / (bw * 1e9) + net.p2p_latency_us * 1e-6

    def stage_step_s(self, stage: int, tokens: int, prefill: bool) -> float:
        """One micro-batch's time on ``stage`` in the event-driven pipeline (scheduler.py): its
        compute and collectives, the hand-off to the next stage (not from the last), and on
        stage 0, which forms the micro-batches, the prefill part of the PP sync
        (:meth:`sync_prefill_s`). The fixed part (:meth:`sync_s`) comes before stage 0 forms a
        micro-batch (the requests and the slot's outputs are received then). An empty
        micro-batch costs nothing past that."""
        if tokens <= 0:
            return 0.0
        work = stage_s(tokens, self.layers[stage], self.layout.tp, self.profile,
                       a2a=self.moe_a2a_backend, ep=self.layout.ep)
        if stage < self.layout.pp - 1:
            work += self.handoff_s(tokens)
        if stage == 0:
            work += self.sync_prefill_s(prefill)
        return work

    def steady_tps(self, chunk_tokens: int) -> float:
        """Input tokens/s of a full pipeline of ``chunk_tokens`` prefill micro-batches (no
        jitter): the slowest stage sets the pace (stage 0 with the sync before each forming)."""
        steps = [self.stage_step_s(s, chunk_tokens, True) for s in range(self.layout.pp)]
        steps[0] += self.sync_s()
        return chunk_tokens / max(steps)
