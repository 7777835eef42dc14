"""Per-GPU memory model: weights per stage, the KV pool, CUDA graphs, NCCL and activations.

SGLang sizes the KV pool from the free memory after the weights (min-reduced over the world)
minus ``pre_model_load_memory x (1 - mem_fraction_static)`` and then takes the minimum token
count over all ranks (``max_total_num_tokens`` is min-all-reduced). Stages are uneven (the
first holds the embedding, the last the lm-head, and layer counts differ when pp does not divide
the layer count), so the heaviest stage sits on that static line and the others below it. On
top come the decode CUDA-graph pool (per layer on the stage, unless disabled), the activation
workspace of the largest micro-batch run so far (PyTorch's caching allocator keeps it) and the
NCCL buffers connected at the first large TP all-reduce (:meth:`MemoryPlan.nccl_runtime_bytes`),
which is why the worst rank ends a benchmark a few GiB above the static line (seeds §8: 79-82
GiB of 85,651 MiB; the profile's [memory] section fits these terms to that table, residuals
stated there).

An MoE all-to-all backend adds its dispatch/combine buffers (:func:`a2a_buffer_bytes`, sized
as the profile's [moe] section documents) on every GPU, allocated lazily by SGLang at the first
forward that dispatches (decode CUDA-graph capture, else the first prefill): after the KV pool
was sized, so they come out of the headroom, not out of the static fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .costmodel import domain_of
from .placement import Layout, stage_layers
from .profile import Profile

MIB = 1024 * 1024
GB = 1e9


@dataclass(frozen=True)
class MemoryPlan:
    """Resolved memory numbers of one layout."""

    profile: Profile
    layout: Layout
    mem_fraction_static: float
    max_total_num_tokens: int
    max_running_requests: int
    req_to_token_pool_size: int
    context_length: int
    decode_graph: bool
    a2a_bytes: float = 0.0  # MoE all-to-all dispatch/combine buffers per GPU

    @property
    def layers(self) -> list[int]:
        """Layers per stage."""
        return stage_layers(self.profile.model.num_layers, self.layout.pp)

    def weights_bytes(self, pp_rank: int) -> float:
        """Weight bytes on one GPU of stage ``pp_rank``."""
        m = self.profile.model
        per_layer = (m.weight_gb_total - m.embedding_gb - m.lm_head_gb) / m.num_layers
        gb = per_layer * self.layers[pp_rank]
        gb += m.embedding_gb if pp_rank == 0 else 0.0
        gb += m.lm_head_gb if pp_rank == self.layout.pp - 1 else 0.0
        return gb * GB / self.layout.tp

    def kv_bytes(self, pp_rank: int) -> float:
        """KV pool bytes on one GPU of stage ``pp_rank``."""
        per_token = self.layers[pp_rank] * self.profile.model.kv_bytes_per_token_per_layer
        return float(self.max_total_num_tokens * per_token)

    def graph_bytes(self, pp_rank: int) -> float:
        """Decode CUDA-graph pool bytes on one GPU of stage ``pp_rank``."""
        if not self.decode_graph:
            return 0.0
        return self.profile.memory.graph_mib_per_layer * MIB * self.layers[pp_rank]

    def activation_bytes(self, peak_tokens: int) -> float:
        """Activation workspace kept after running a micro-batch of ``peak_tokens``."""
        mem = self.profile.memory
        per_token = (
            mem.activation_bytes_per_token + mem.activation_bytes_per_token_tp / self.layout.tp
        )
        return peak_tokens * per_token

    def nccl_runtime_bytes(self) -> float:
        """NCCL buffers connected lazily at the first large TP collective (after KV sizing).

        NCCL >= 2.22 connects each algorithm/protocol's buffers at its first use
        (``NCCL_RUNTIME_CONNECT=1``); SGLang's init collectives are tiny, so the buffers of the
        prefill-sized all-reduces come after the KV pool was sized, on top of the static
        fraction. Their size follows the channel count, i.e. how far the TP group spans.
        """
        mem = self.profile.memory
        if self.layout.tp <= 1:
            return 0.0
        span, _ = domain_of(self.layout.tp, self.profile)
        mib = {
            "island": mem.nccl_runtime_mib_island,
            "node": mem.nccl_runtime_mib_node,
            "multinode": mem.nccl_runtime_mib_multinode,
        }[span]
        return mib * MIB

    def used_mib(self, pp_rank: int, phase: str, peak_tokens: int = 0) -> int:
        """Memory used on one GPU of ``pp_rank`` after boot ``phase``.

        Phases in order: ``init`` (context + NCCL), ``loaded`` (+weights), ``kv`` (+KV pool),
        ``ready`` (+CUDA graphs, the lazily connected NCCL buffers and any A2A buffers; plus the
        activation workspace of ``peak_tokens``).
        """
        order = ["init", "loaded", "kv", "ready"]
        level = order.index(phase)
        total = self.profile.gpu.cuda_context_mib * MIB + self.profile.memory.nccl_buffer_mib * MIB
        if level >= 1:
            total += self.weights_bytes(pp_rank)
        if level >= 2:
            total += self.kv_bytes(pp_rank)
        if level >= 3:
            total += self.graph_bytes(pp_rank) + self.activation_bytes(peak_tokens)
            total += self.nccl_runtime_bytes()
            total += self.a2a_bytes
        return int(total / MIB)

    def kv_gb(self, pp_rank: int) -> float:
        """KV pool of ``pp_rank`` in GB (server info ``memory_usage.kvcache``)."""
        return self.kv_bytes(pp_rank) / GB


def plan_memory(
    profile: Profile,
    layout: Layout,
    *,
    mem_fraction_static: float | None,
    chunked_prefill_size: int,
    max_total_tokens: int | None = None,
    max_running_requests: int | None = None,
    context_length: int | None = None,
    decode_graph: bool = True,
    moe_a2a_backend: str = "none",
) -> MemoryPlan:
    """Size the KV pool and the request limits like SGLang's model runner does."""
    frac = (
        mem_fraction_static
        if mem_fraction_static is not None
        else profile.memory.mem_fraction_static_default
    )
    ctx_len = context_length or profile.model.context_length
    probe = MemoryPlan(profile, layout, frac, 0, 0, 0, ctx_len, decode_graph)
    # SGLang 0.5.23 (mem_cache/kv_cache_configurator.py, _profile_available_bytes and
    # _apply_token_constraints): rest = free memory after the weights, min-reduced over the
    # world, minus pre_model_load_memory x (1 - mem_fraction_static); each stage's token count
    # is rest / its KV cell, min-reduced over the PP ranks. What was resident before the load
    # (CUDA context, NCCL init buffers) is thus partly inside the static budget.
    total = profile.gpu.memory_total_mib * MIB
    init = (profile.gpu.cuda_context_mib + profile.memory.nccl_buffer_mib) * MIB
    free = min(total - init - probe.weights_bytes(s) for s in range(layout.pp))
    rest = free - (total - init) * (1 - frac)
    tokens = math.inf
    for layers in probe.layers:
        tokens = min(tokens, rest / (layers * profile.model.kv_bytes_per_token_per_layer))
    max_total = int(tokens)
    if max_total_tokens is not None:
        max_total = min(max_total, max_total_tokens)
    # max_total <= 0 is reported by the rank at KV allocation, where SGLang raises it
    pool = min(max(int(max_total / ctx_len * 512), 2048), 4096)
    mrr = min(max_running_requests if max_running_requests is not None else max_total // 2, pool)
    a2a = a2a_buffer_bytes(profile, layout, moe_a2a_backend, chunked_prefill_size)
    return MemoryPlan(
        profile, layout, frac, max_total, max(mrr, 1), pool, ctx_len, decode_graph, a2a
    )


def a2a_buffer_bytes(profile: Profile, layout: Layout, backend: str, chunk: int) -> float:
    """Dispatch/combine buffer bytes per GPU of an MoE all-to-all backend (0 for ``none``).

    ``deepep`` (``auto`` mode: low-latency and normal buffers), ``mooncake`` (low-latency
    layout only) and ``flashinfer`` are sized from SGLang's and DeepEP's code (formulas and
    sources in the profile's [moe] section); other backends are not modelled (0).
    """
    moe, hidden = profile.moe, profile.model.hidden_size
    if backend == "none" or moe.num_experts <= 0 or layout.ep <= 1:
        return 0.0
    ep = layout.ep
    hid_b = hidden * 2
    if backend == "flashinfer":
        tokens = max(chunk, moe.flashinfer_min_dispatch_tokens)
        return float(ep * tokens * (hid_b + moe.experts_per_token * 8 + hid_b))
    if backend not in ("deepep", "mooncake"):
        return 0.0
    t, e = moe.deepep_max_dispatch_tokens_per_rank, moe.num_experts
    low_latency = 2 * (e * t * hid_b + e * t * (16 + hid_b))
    granule = moe.nvshmem_granularity_mib * MIB
    rdma = math.ceil(low_latency / granule) * granule
    if backend == "mooncake":
        return float(rdma)
    gpn = profile.gpu.gpus_per_node
    nodes = math.ceil(ep / gpn)
    nvl = moe.deepep_num_channels * min(ep, gpn) * moe.deepep_nvl_chunked_recv_tokens * hid_b
    normal_rdma = moe.deepep_num_channels * nodes * moe.deepep_rdma_chunked_recv_tokens * hid_b * 2
    if nodes > 1:
        rdma = max(rdma, math.ceil(normal_rdma / granule) * granule)
    return float(rdma + nvl)
