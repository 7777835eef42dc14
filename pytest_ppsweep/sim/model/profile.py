"""Hardware/model profiles of the emulator, loaded from TOML (``sim/profiles/<name>.toml``).

A profile holds only physical parameters (layer count, bytes, bandwidths, latencies); the cost
model turns them into per-layout times, so no value is keyed by a PP/TP configuration.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypeVar

# The TOML files stay at sim/profiles/ (package data), one level above this layer.
PROFILE_DIR = Path(__file__).resolve().parent.parent / "profiles"
DEFAULT_PROFILE = "kimi-k3-6000d"


@dataclass(frozen=True)
class ModelSpec:
    """The served model: shape, weight bytes and KV bytes."""

    model_path_default: str
    model_type: str
    architectures: tuple[str, ...]
    num_layers: int
    hidden_size: int
    vocab_size: int
    context_length: int
    weight_gb_total: float
    embedding_gb: float
    lm_head_gb: float
    kv_bytes_per_token_per_layer: int
    allreduces_per_layer: float


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model and how GPUs are grouped in a node."""

    name: str
    memory_total_mib: int
    gpus_per_node: int
    gpus_per_pcie_island: int
    driver_version: str
    idle_used_mib: int
    cuda_context_mib: int
    hbm_effective_gbs: float


@dataclass(frozen=True)
class ComputeSpec:
    """GEMM work of one reference chunk and the small-GEMM efficiency curve."""

    reference_chunk_tokens: int
    chunk_gpu_seconds: float
    n_half: float
    gamma: float
    min_layer_ms: float


@dataclass(frozen=True)
class NetworkSpec:
    """Collective and point-to-point transport parameters."""

    busbw_pcie_island_gbs: float
    busbw_node_gbs: float
    busbw_multinode_gbs: float
    ar_step_latency_us: float
    p2p_intra_node_gbs: float
    p2p_inter_node_gbs: float
    p2p_latency_us: float


@dataclass(frozen=True)
class SchedulerSpec:
    """Pipeline scheduler overheads."""

    stage_sync_ms: float
    stage_sync_base_ms: float
    jitter_frac: float
    # σ in % of a normal log offset drawn once per boot (rank/serve.py) that scales every
    # micro-batch's work: the boot-to-boot spread of one configuration
    boot_offset_pct: float


@dataclass(frozen=True)
class MemorySpec:
    """GPU memory parameters beyond weights and KV."""

    mem_fraction_static_default: float
    chunked_prefill_size_default: int
    activation_bytes_per_token: float
    activation_bytes_per_token_tp: float
    graph_mib_per_layer: float
    nccl_buffer_mib: float
    # NCCL buffers connected at the first large collective, after the KV pool was sized, by how
    # far the TP group spans (costmodel.domain_of): island, one node, several nodes
    nccl_runtime_mib_island: float
    nccl_runtime_mib_node: float
    nccl_runtime_mib_multinode: float


@dataclass(frozen=True)
class MoeSpec:
    """Routed experts and the dispatch/combine buffers of the MoE all-to-all backends."""

    num_experts: int
    experts_per_token: int
    expert_weight_fraction: float
    moe_allreduces_per_layer: float
    a2a_latency_us: float
    deepep_max_dispatch_tokens_per_rank: int
    deepep_num_channels: int
    deepep_nvl_chunked_recv_tokens: int
    deepep_rdma_chunked_recv_tokens: int
    nvshmem_granularity_mib: float
    flashinfer_min_dispatch_tokens: int


@dataclass(frozen=True)
class BootSpec:
    """Start-up phase parameters (emulated seconds / bandwidths)."""

    launch_s: float
    dist_init_s: float
    dist_init_per_node_s: float
    disk_read_gbs: float
    kv_alloc_s: float
    graph_capture_s_per_layer: float
    warmup_jit_s_per_stage: float


@dataclass(frozen=True)
class PowerSpec:
    """What one GPU draws, for the energy counter the nvidia-smi shim serves (sim/smi.py): idle
    watts while its stage has no micro-batch, busy watts while it works on one (the scheduler's
    stage steps), and how often NVML's total-energy counter moves (emulated milliseconds)."""

    idle_w: float
    busy_w: float
    counter_step_ms: float


@dataclass(frozen=True)
class Profile:
    """A complete emulator profile."""

    name: str
    model: ModelSpec
    gpu: GpuSpec
    compute: ComputeSpec
    network: NetworkSpec
    scheduler: SchedulerSpec
    memory: MemorySpec
    boot: BootSpec
    moe: MoeSpec
    power: PowerSpec


_T = TypeVar("_T")


def _section(cls: type[_T], raw: dict[str, Any], name: str) -> _T:
    """Build one section dataclass, failing loudly on missing or unknown keys."""
    data = dict(raw.get(name, {}))
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - names
    missing = names - set(data)
    if unknown or missing:
        raise ValueError(
            f"profile section [{name}]: unknown {sorted(unknown)}, missing {sorted(missing)}"
        )
    for key, value in data.items():
        if isinstance(value, list):
            data[key] = tuple(value)
    return cls(**data)


def resolve_profile_path(name_or_path: str) -> Path:
    """A shipped profile name (``tiny``) or a path to a TOML file."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.is_file():
        return candidate
    return PROFILE_DIR / f"{name_or_path}.toml"


def load_profile(name_or_path: str = DEFAULT_PROFILE) -> Profile:
    """Load and validate a profile."""
    path = resolve_profile_path(name_or_path)
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    return Profile(
        name=str(raw.get("name", path.stem)),
        model=_section(ModelSpec, raw, "model"),
        gpu=_section(GpuSpec, raw, "gpu"),
        compute=_section(ComputeSpec, raw, "compute"),
        network=_section(NetworkSpec, raw, "network"),
        scheduler=_section(SchedulerSpec, raw, "scheduler"),
        memory=_section(MemorySpec, raw, "memory"),
        boot=_section(BootSpec, raw, "boot"),
        moe=_section(MoeSpec, raw, "moe"),
        power=_section(PowerSpec, raw, "power"),
    )


def with_compute_factor(profile: Profile, factor: float) -> Profile:
    """``profile`` with every chunk's compute ``factor`` times slower (an image that regressed:
    ``PPSWEEP_SIM_IMAGE_SLOWDOWN``, sim/launch/settings.py); the profile itself for 1.0."""
    if factor == 1.0:
        return profile
    compute = replace(profile.compute, chunk_gpu_seconds=profile.compute.chunk_gpu_seconds * factor)
    return replace(profile, compute=compute)
