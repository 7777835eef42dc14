"""The planner's physical cost model of a prefill round on a PP x TP layout (plain numpy).

It mirrors the emulator's model (``sim/model/costmodel.py``, ``scheduler.py``, ``placement.py``,
``gpumem.py``, ``bootplan.py``) formula for formula, without importing it (the plugin and the
emulator import nothing of each other, tests/test_layering.py): the same event-driven pipeline,
where micro-batch ``i`` (slot ``i % pp``) is formed once stage 0 finished ``i - 1`` and ``i - pp``
left the last stage, plus the fixed sync, and each stage works on one micro-batch at a time::

    formed_i = max(end_{i-1,0}, end_{i-pp,pp-1}) + sync_base * (pp - 1)
    end_{i,s} = max(end_{i,s-1}, end_{i-1,s}) + T_step(n_i, s)
    T_step = T_stage(n, layers_s) + handoff(n) [s < pp - 1]
             + stage_sync * (pp - 1) * pp - sync_base * (pp - 1) [s = 0]
    T_stage = max(n / N_ref * K * layers / L / tp * (1 + (tp / n_half) ** gamma), layers * floor)
            + layers * a * (2 (tp - 1) * step_latency + 2 (tp - 1) / tp * n * hidden * 2 / busbw)
    busbw by the span of the TP group: one PCIe island, one node, several nodes (RoCE)
    handoff = n * hidden * 2 / p2p_bw (inter-node when any stage boundary leaves a node) + p2p_lat

and the same scheduling: stage 0 forms a micro-batch of at most ``chunk`` tokens (the chunked
request first, then new requests while ``pp_max_micro_batch_size`` allows), a request's first
token comes when its last chunk leaves the last stage, and a closed-loop client sends its next
request then; micro-batch ``i`` sees the requests sent by micro-batches up to ``i - pp``. Which
micro-batch carries how many tokens does not depend on the parameters (output length 1, the KV
pool large enough), so :func:`schedule` runs the scheduling once per point and
:func:`predict_log` only prices the micro-batches (one pass over them, a few hundred steps): a
fit evaluates the model thousands of times in about a second.

What the emulator has and this model leaves out: per-micro-batch jitter (the fit's noise term
covers it), decode (the planner predicts prefill rounds: output length 1) and KV-capacity
admission (the pool holds every C the sweeps use). The parameters to fit are in :data:`PARAMS`;
the constants of the hardware (GPUs per node and island, layers, hidden size, the fixed sync)
are not fitted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = [
    "BOOT_PARAMS",
    "MEM_PARAMS",
    "PARAMS",
    "SEEDS_FITTED",
    "UNINFORMATIVE_LOG_SD",
    "Hardware",
    "Param",
    "Point",
    "Schedule",
    "boot_features",
    "busbw_param",
    "independent_priors",
    "mem_features",
    "predict_log",
    "schedule",
    "stage_layers",
]

BF16 = 2
MIB = 1024 * 1024


@dataclass(frozen=True)
class Param:
    """A fitted parameter: its prior centre, its prior spread (log-normal sd for the round model,
    absolute sd for the linear boot and memory models), its unit and what it stands for."""

    name: str
    prior: float
    prior_sd: float
    unit: str
    meaning: str
    measured: str = ""  # where a measured prior comes from (e.g. the run's comm.csv), else ""


# The round model's parameters, fitted in log space. Prior centres are the emulator profile's
# values for the seeds' cluster (sim/profiles/kimi-k3-6000d.toml: K, n_half, gamma and stage_sync
# fitted to the seeds' table by this model; bus bandwidth and latency from the seeds' §9.2
# nccl-tests); the prior spreads are wide so that the measured rounds decide.
PARAMS: tuple[Param, ...] = (
    Param("chunk_gpu_s", 8.83, 0.3, "GPU-s", "compute of one reference chunk, whole model"),
    Param("n_half", 2.17, 0.3, "GPUs", "small-GEMM loss 1 + (tp / n_half)^gamma"),
    Param("gamma", 0.504, 0.2, "", "small-GEMM loss exponent"),
    Param("busbw_island_gbs", 40.85, 0.15, "GB/s", "all-reduce bus bandwidth, one PCIe island"),
    Param("busbw_node_gbs", 39.13, 0.15, "GB/s", "all-reduce bus bandwidth, one node"),
    Param("busbw_multinode_gbs", 39.9, 0.15, "GB/s", "all-reduce bus bandwidth across nodes"),
    Param("ar_step_latency_us", 2.0, 0.5, "us", "latency of one ring step of an all-reduce"),
    Param("stage_sync_ms", 2.71, 0.3, "ms",
          "PP prefill sync per stage boundary per micro-batch slot, per micro-batch"),
    Param("p2p_intra_gbs", 24.0, 0.7, "GB/s", "stage hand-off bandwidth within a node"),
    Param("p2p_inter_gbs", 45.0, 0.7, "GB/s", "stage hand-off bandwidth between nodes"),
    Param("p2p_latency_us", 25.0, 1.0, "us", "stage hand-off latency"),
)

# The four round parameters whose prior centres above were fitted (in the emulator profile) to
# the seeds' own table: K, n_half, gamma, stage_sync. A validation that predicts one of the
# seeds' layouts must not start from them (they saw that layout), so :func:`independent_priors`
# widens them to log-sd 2.0 (a factor ~27 at 90 %: uninformative at the data's scale) and keeps
# the rest, whose centres come from independent measurements (the seeds' §9.2 nccl-tests for
# bus bandwidth and latency; P2P and latency stay so wide that the data or nothing decide them).
SEEDS_FITTED = ("chunk_gpu_s", "n_half", "gamma", "stage_sync_ms")
UNINFORMATIVE_LOG_SD = 2.0


def independent_priors(params: tuple[Param, ...] = PARAMS,
                       fitted_to_target: tuple[str, ...] = SEEDS_FITTED) -> tuple[Param, ...]:
    """``params`` with the priors fitted to the target data (``fitted_to_target``) made
    uninformative: what an honest leave-one-layout-out on the seeds' table fits with."""
    return tuple(replace(p, prior_sd=max(p.prior_sd, UNINFORMATIVE_LOG_SD))
                 if p.name in fitted_to_target else p for p in params)


# Boot time, linear: base + graph_s_per_layer * max layers per stage (decode graph on) +
# warmup_s_per_stage * pp (bootplan.py: launch + dist init + weight load + KV alloc are ~equal
# for every layout of one cluster, the graph capture and the stage-by-stage warm-up are not).
BOOT_PARAMS: tuple[Param, ...] = (
    Param("boot_base_s", 240.0, 200.0, "s", "launch, dist init, weight load, KV alloc"),
    Param("graph_s_per_layer", 3.5, 4.0, "s", "decode CUDA-graph capture per layer on a stage"),
    Param("warmup_s_per_stage", 14.0, 20.0, "s", "first-forward warm-up per PP stage"),
)

# Worst-rank memory after the benchmark, linear: mem_fraction_static x total (the heaviest stage
# sits there) + overhead + graph pool per layer + the activation workspace of one chunk
# (gpumem.py: a TP-independent part and a part divided by tp).
MEM_PARAMS: tuple[Param, ...] = (
    Param("mem_overhead_mib", 1000.0, 1500.0, "MiB", "NCCL/custom all-reduce buffers"),
    Param("graph_mib_per_layer", 12.0, 20.0, "MiB", "decode CUDA-graph pool per layer"),
    Param("act_mib_per_ktok", 0.286 * 1024, 400.0, "MiB", "activation workspace per 1K tokens"),
    Param("act_tp_mib_per_ktok", 0.381 * 1024, 600.0, "MiB",
          "TP-sharded activation workspace per 1K tokens (divided by tp)"),
)


@dataclass(frozen=True)
class Hardware:
    """Constants of the cluster and model (not fitted)."""

    gpus: int = 32
    gpus_per_node: int = 8
    gpus_per_pcie_island: int = 4
    num_layers: int = 61
    hidden_size: int = 7168
    allreduces_per_layer: float = 3.28
    reference_chunk_tokens: int = 8192
    min_layer_ms: float = 0.15
    stage_sync_base_ms: float = 1.0  # the fixed PP sync per stage boundary (profile [scheduler])
    mem_total_mib: float = 85651.0
    mem_fraction_static: float = 0.88
    max_running_requests: int = 2048

    @property
    def nnodes(self) -> int:
        return max(self.gpus // self.gpus_per_node, 1)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Hardware:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: type(getattr(cls(), k))(v) for k, v in raw.items() if k in known})


@dataclass(frozen=True)
class Point:
    """One benchmark point to predict: a layout and a workload."""

    pp: int
    tp: int
    concurrency: int
    input_len: int = 16384
    num_requests: int = 40
    chunk: int = 8192
    micro: int = 0  # pp_max_micro_batch_size; 0: SGLang's default max(max_running // pp, 1)
    decode_graph: bool = True


def stage_layers(num_layers: int, pp: int) -> list[int]:
    """Layers per PP stage (mirrors sim/model/placement.py: the remainder to the middle stages)."""
    base, extra = divmod(num_layers, pp)
    counts = [base] * pp
    order = [*range(1, pp - 1), pp - 1, 0] if pp > 2 else list(range(pp))
    for i in order[:extra]:
        counts[i] += 1
    return counts


@lru_cache(maxsize=256)
def crosses_nodes(pp: int, tp: int, hw: Hardware) -> bool:
    """Whether any stage boundary leaves a node (mirrors placement.boundary_crosses_nodes)."""
    if pp <= 1:
        return False
    nnodes = hw.nnodes
    if max(nnodes // pp, 1) > 1:
        return True
    per_node = max(pp // nnodes, 1)
    return any(s // per_node != (s + 1) // per_node for s in range(pp - 1))


@dataclass(frozen=True)
class Schedule:
    """The parameter-free part of a round: tokens per stage per tick, and for each request the
    tick after which it arrived (-1: at the start) and the tick its first token came."""

    tokens: np.ndarray = field(repr=False)  # (ticks, pp)
    arrive: np.ndarray = field(repr=False)
    done: np.ndarray = field(repr=False)
    # the same by micro-batch (micro-batch i is the one formed at tick i): the distinct token
    # counts, each micro-batch's index into them, the micro-batch of each request's last chunk
    # and the micro-batch whose completion sent it (-1: at the start)
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    size_of: tuple[int, ...] = ()
    last_mb: tuple[int, ...] = ()
    sent_by: tuple[int, ...] = ()


@lru_cache(maxsize=4096)
def schedule(pp: int, concurrency: int, input_len: int, num_requests: int, chunk: int,
             micro: int) -> Schedule:
    """Run the scheduling of one closed-loop round (mirrors sim/model/scheduler.py): which
    micro-batch (one formed per tick, tick ``i`` forms micro-batch ``i``, a micro-batch leaves
    ``pp - 1`` ticks later) carries which request's chunk; its timing is :func:`predict_log`'s."""
    n = num_requests
    remaining = [input_len] * n
    slot_of = [-1] * n
    arrive = np.full(n, -1, dtype=np.int64)
    done = np.full(n, -1, dtype=np.int64)
    queue: deque[int] = deque(range(min(concurrency, n)))
    sent = min(concurrency, n)
    running: list[set[int]] = [set() for _ in range(pp)]
    pipeline: list[list[tuple[int, int, bool]] | None] = [None] * pp
    chunked: int | None = None
    rows: list[list[int]] = []
    finished = 0
    tick = 0
    while finished < n:
        if tick > 100 * (n * (input_len // max(chunk, 1) + 2) + pp + 10):
            raise RuntimeError("planner schedule does not terminate")  # a bug, never data
        slot = tick % pp
        budget = chunk
        pieces: list[tuple[int, int, bool]] = []

        def take(r: int, k: int, pieces: list[tuple[int, int, bool]] = pieces) -> None:
            nonlocal chunked
            remaining[r] -= k
            last = remaining[r] <= 0
            chunked = None if last else r
            pieces.append((r, k, last))

        if chunked is not None:
            k = min(remaining[chunked], budget)
            take(chunked, k)
            budget -= k
        allocatable = micro - len(running[slot])
        while budget > 0 and allocatable > 0 and queue and chunked is None:
            r = queue.popleft()
            slot_of[r] = slot
            running[slot].add(r)
            allocatable -= 1
            k = min(remaining[r], budget)
            take(r, k)
            budget -= k
        pipeline[0] = pieces or None
        rows.append([sum(p[1] for p in mb) if mb else 0 for mb in pipeline])
        out = pipeline[-1]
        pipeline = [None, *pipeline[:-1]]
        for r, _k, last in out or ():
            if not last:
                continue
            done[r] = tick
            running[slot_of[r]].discard(r)
            finished += 1
            if sent < n:
                arrive[sent] = tick
                queue.append(sent)
                sent += 1
        tick += 1
    tokens = np.asarray(rows, dtype=np.float64)
    last_mb = done - (pp - 1)
    sizes, size_of = np.unique(tokens[: int(last_mb.max()) + 1, 0], return_inverse=True)
    return Schedule(tokens, arrive, done, sizes, tuple(int(k) for k in size_of),
                    tuple(int(m) for m in last_mb),
                    tuple(int(a) - (pp - 1) if a >= 0 else -1 for a in arrive))


_NAMES = tuple(p.name for p in PARAMS)


def _values(theta: np.ndarray) -> dict[str, float]:
    return dict(zip(_NAMES, np.exp(theta).tolist(), strict=True))


def busbw_param(tp: int, hw: Hardware) -> str:
    """The bus-bandwidth parameter of a TP group of ``tp`` GPUs: how far the group spans (one
    PCIe island, one node, several nodes; mirrors sim/model/costmodel.domain_of)."""
    if tp <= hw.gpus_per_pcie_island:
        return "busbw_island_gbs"
    if tp <= hw.gpus_per_node:
        return "busbw_node_gbs"
    return "busbw_multinode_gbs"


def _busbw(tp: int, v: dict[str, float], hw: Hardware) -> float:
    return v[busbw_param(tp, hw)]


def micro_of(point: Point, hw: Hardware) -> int:
    return point.micro or max(hw.max_running_requests // point.pp, 1)


@lru_cache(maxsize=256)
def _layers(num_layers: int, pp: int) -> np.ndarray:
    return np.asarray(stage_layers(num_layers, pp), dtype=np.float64)


def _percentile(sorted_values: np.ndarray, q: float) -> float:
    """``np.percentile(..., q)`` (linear interpolation) of an already sorted array."""
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo))


def predict_log(theta: np.ndarray, point: Point, hw: Hardware) -> np.ndarray:
    """log of (Input TPS, TTFT p50 s, TTFT p95 s) of ``point`` under parameters ``exp(theta)``.

    The event-driven pipeline of sim/model/scheduler.py: micro-batch ``i`` is formed when stage
    0 finished ``i - 1`` and micro-batch ``i - pp`` left the last stage, plus the fixed sync;
    each stage works on one micro-batch at a time, in order."""
    v = _values(theta)
    pp, tp = point.pp, point.tp
    sch = schedule(pp, point.concurrency, point.input_len, point.num_requests, point.chunk,
                   micro_of(point, hw))
    layers = _layers(hw.num_layers, pp)
    tok = sch.sizes[:, None]  # (sizes, 1)
    eff = 1.0 + (tp / v["n_half"]) ** v["gamma"]
    ideal = tok / hw.reference_chunk_tokens * v["chunk_gpu_s"] * layers / hw.num_layers
    step = np.maximum(ideal / tp * eff, layers * hw.min_layer_ms * 1e-3)
    if tp > 1:
        steps = 2.0 * (tp - 1)
        ar = (steps * v["ar_step_latency_us"] * 1e-6
              + steps / tp * tok * hw.hidden_size * BF16 / (_busbw(tp, v, hw) * 1e9))
        step = step + layers * hw.allreduces_per_layer * ar
    base = hw.stage_sync_base_ms * 1e-3 * (pp - 1)
    if pp > 1:
        bw = v["p2p_inter_gbs"] if crosses_nodes(pp, tp, hw) else v["p2p_intra_gbs"]
        step[:, :-1] += tok * hw.hidden_size * BF16 / (bw * 1e9) + v["p2p_latency_us"] * 1e-6
        step[:, 0] += (v["stage_sync_ms"] * 1e-3 * pp * (pp - 1) - base)
    step = np.where(tok > 0, step, 0.0)
    rows = step.tolist()
    ends = [0.0] * pp  # when each stage finished its latest micro-batch
    done: list[float] = []
    for i, k in enumerate(sch.size_of):
        t = ends[0]
        if i >= pp and done[i - pp] > t:
            t = done[i - pp]
        row = rows[k]
        t += base + row[0]
        ends[0] = t
        for s in range(1, pp):
            if ends[s] > t:
                t = ends[s]
            t += row[s]
            ends[s] = t
        done.append(t)
    ttft = np.asarray([done[m] - (done[a] if a >= 0 else 0.0)
                       for m, a in zip(sch.last_mb, sch.sent_by, strict=True)])
    tps = point.num_requests * point.input_len / max(done)
    ttft.sort()
    return np.log([tps, _percentile(ttft, 50), _percentile(ttft, 95)])


def boot_features(point: Point, hw: Hardware) -> np.ndarray:
    """Features of the linear boot model (see :data:`BOOT_PARAMS`)."""
    graph = max(stage_layers(hw.num_layers, point.pp)) if point.decode_graph else 0
    return np.asarray([1.0, float(graph), float(point.pp)])


def mem_features(point: Point, hw: Hardware) -> np.ndarray:
    """Features of the linear memory model beyond the static fraction (see :data:`MEM_PARAMS`)."""
    graph = max(stage_layers(hw.num_layers, point.pp)) if point.decode_graph else 0
    ktok = point.chunk / 1024
    return np.asarray([1.0, float(graph), ktok, ktok / point.tp])


def mem_static_mib(hw: Hardware) -> float:
    """The static fraction every heaviest stage sits at (SGLang sizes the KV pool to it)."""
    return hw.mem_fraction_static * hw.mem_total_mib
