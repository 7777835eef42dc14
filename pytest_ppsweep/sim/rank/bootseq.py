"""The start-up sequence of a rank, with SGLang's milestone log lines (contract §3.1).

Order: SIMULATED banner, ``server_args=...``, ``Init torch distributed begin.``, rendezvous
(rank 0 waits for every rank; others connect with retries), ``Init torch distributed ends``,
``Load weight begin/end``, ``KV Cache is allocated``, ``Memory pool end``, ``Capture cuda graph``
(unless disabled), the ``max_total_num_tokens=...`` line. :func:`boot` then returns its phase
clock (sim/rank/handover.py) and sim/rank/serve.py takes over; sim/rank/main.py runs the two. Phase
durations come from sim/model/bootplan.py and are waited at absolute emulated instants.
"""

from __future__ import annotations

import asyncio

from ..http.api_info import DECODE_GRAPH_BS
from ..launch import faultlog
from ..model.gpumem import GB, MIB
from .handover import Phases
from .node import RankProcess
from .rendezvous import RendezvousClient, RendezvousServer, split_addr


def _gb(mib: float) -> float:
    return mib * MIB / GB


def banner(rp: RankProcess) -> None:
    """First lines of every rank."""
    cfg = rp.cfg
    rp.log.line(
        f"SIMULATED SGLang (pytest-ppsweep emulator, time scale {cfg.settings.time_scale:g}x, "
        f"profile {cfg.profile.name}) — not a real server"
    )
    for note in cfg.notes:
        rp.log.line(note)
    shown = {k: v for k, v in vars(cfg.args).items() if k not in ("api_key", "admin_api_key")}
    shown["api_key"] = "<redacted>" if cfg.args.api_key else None
    rp.log.line(f"server_args={shown}")


async def rendezvous(rp: RankProcess) -> bool:
    """Join the other ranks; False (after logging the error) when that fails."""
    cfg = rp.cfg
    nnodes = cfg.args.nnodes
    timeout_real = cfg.dist_timeout_real_s()
    if nnodes == 1:
        return True
    host, port = split_addr(cfg.args.dist_init_addr or "")
    if rp.rank == 0:
        rp.server = RendezvousServer(nnodes, rp.on_peer_lost)
        await rp.server.start(host, port)
        server = rp.server
        if not await server.wait_for(lambda: server.joined >= nnodes, timeout_real):
            rp.fail(faultlog.store_timeout_error(cfg.dist_timeout_s, server.joined, nnodes))
            return False
        server.broadcast({"type": "go"})
        return True
    never = rp.faults.get("never_join")
    if never is not None and int(never.number()) == rp.rank:
        await asyncio.sleep(
            timeout_real
        )  # stuck before the store connect (wrong address, firewall)
        rp.fail(faultlog.client_timeout_error(cfg.dist_timeout_s, cfg.args.dist_init_addr or ""))
        return False
    rp.client = RendezvousClient(rp.rank)
    if not await rp.client.connect(host, port, timeout_real):
        rp.fail(faultlog.client_timeout_error(cfg.dist_timeout_s, cfg.args.dist_init_addr or ""))
        return False
    rp.spawn(rp.follow_rank0())
    await rp.go.wait()
    return True


def a2a_buffers_fit(rp: RankProcess) -> bool:
    """The first prefill's memory against each local GPU's; False after logging the OOM.

    SGLang allocates an MoE all-to-all backend's buffers at the first forward that dispatches
    (decode-graph capture, else the first prefill), after the KV pool: they must fit next to the
    workspace of a full prefill chunk, which the first prefill allocates. Without such buffers
    the chunk's workspace alone must fit (a GPU never shows more used than it has: a chunk too
    large for what the static fraction left fails with the forward's OOM). Checked here, once,
    for every stage on this node.
    """
    cfg = rp.cfg
    mem = cfg.mem
    total_mib = cfg.profile.gpu.memory_total_mib
    stages = [s.pp_rank for s in rp.schedulers] or [0]
    worst = max(stages, key=lambda s: mem.used_mib(s, "ready", cfg.chunked_prefill_size))
    need = mem.used_mib(worst, "ready", cfg.chunked_prefill_size)
    if need <= total_mib:
        return True
    total_gib = total_mib * MIB / 2**30
    if mem.a2a_bytes > 0:
        free_gib = (total_mib - need) * MIB / 2**30 + mem.a2a_bytes / 2**30
        rp.fail(faultlog.a2a_oom_error(0, cfg.args.moe_a2a_backend, mem.a2a_bytes / 2**30,
                                       total_gib, max(free_gib, 0.0)))
    else:
        chunk_gib = mem.activation_bytes(cfg.chunked_prefill_size) / 2**30
        free_gib = (total_mib - need) * MIB / 2**30 + chunk_gib
        rp.fail(faultlog.forward_oom_error(0, chunk_gib, total_gib, max(free_gib, 0.0)))
    return False


def _devices_exist(rp: RankProcess) -> bool:
    """Whether every local scheduler's GPU exists on this node (the profile's gpus_per_node).

    SGLang takes tp x pp / nnodes GPUs per node (Layout.gpus_per_node); a scheduler whose index
    is past the node's GPUs fails in ``torch.cuda.set_device`` before torch distributed starts,
    and the node exits. Logged by each such scheduler, like SGLang.
    """
    have = rp.cfg.profile.gpu.gpus_per_node
    missing = [s for s in rp.schedulers if s.gpu_index >= have]
    for sched in missing:
        prefix = sched.prefix(rp.cfg.layout)
        rp.log.line(faultlog.invalid_device_context(sched.gpu_index, sched.tp_rank,
                                                    rp.cfg.layout.tp), prefix)
        rp.log.line(faultlog.invalid_device_error(), prefix)
    if missing:
        rp.exit_failed()
    return not missing


async def boot(rp: RankProcess) -> Phases | None:
    """Boot this rank up to ``max_total_num_tokens``; its phase clock, or None after a failure.

    A failure has been logged and the exit requested (``rp.fail``) when this returns None.
    """
    cfg, slog, mem, plan = rp.cfg, rp.slog, rp.cfg.mem, rp.cfg.boot
    banner(rp)
    phases = Phases(rp)
    slow = rp.faults.get("slow_start", rp.rank)
    await phases.wait(plan.launch_s + (slow.number() if slow else 0.0))
    if not _devices_exist(rp):
        return None
    slog.each("Init torch distributed begin.")
    if not await rendezvous(rp):
        return None
    phases.restart()
    if rp.faults.get("nccl_init", rp.rank):
        await phases.wait(plan.dist_init_s / 2)
        rp.fail(faultlog.nccl_init_error(rp.rank * cfg.layout.gpus_per_node))
        return None
    await phases.wait(plan.dist_init_s)
    rp.publish("init")
    total_gb = _gb(cfg.profile.gpu.memory_total_mib)
    s0 = rp.schedulers[0].pp_rank if rp.schedulers else 0
    slog.each(f"Init torch distributed ends. mem usage={_gb(mem.used_mib(s0, 'init')):.2f} GB")
    slog.each(f"Load weight begin. avail mem={total_gb - _gb(mem.used_mib(s0, 'init')):.2f} GB")
    if rp.faults.get("oom_load", rp.rank):
        await phases.wait(plan.load_s * 0.6)
        rp.fail(faultlog.oom_error(0, total_gb * GB / 2**30, 1.12))
        return None
    await phases.wait(plan.load_s)
    rp.publish("loaded")
    loaded = _gb(mem.used_mib(s0, "loaded"))
    slog.each(
        f"Load weight end. elapsed={plan.load_s:.2f} s, type={cfg.profile.model.architectures[0]}, "
        f"avail mem={total_gb - loaded:.2f} GB, mem usage={mem.weights_bytes(s0) / GB:.2f} GB."
    )
    if mem.max_total_num_tokens <= 0:
        rp.fail(faultlog.not_enough_memory_error())
        return None
    await phases.wait(plan.kv_alloc_s)
    rp.publish("kv")
    avail = total_gb - _gb(mem.used_mib(s0, "kv"))
    slog.each(
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {mem.max_total_num_tokens}, "
        f"KV size: {mem.kv_gb(s0):.2f} GB"
    )
    slog.each(f"Memory pool end. avail mem={avail:.2f} GB")
    if cfg.args.decode_graph:
        slog.each(
            f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB"  # noqa: E501
        )
        slog.each(f"Capture cuda graph bs {DECODE_GRAPH_BS}")
        if rp.faults.get("custom_ar_graph", rp.rank):
            await phases.wait(plan.graph_s / 3)
            slog.each(f"Registering {len(DECODE_GRAPH_BS) * 3} cuda graph addresses")
            rp.fail(faultlog.custom_ar_capture_error())
            return None
        await phases.wait(plan.graph_s)
        graph_gb = mem.graph_bytes(s0) / GB
        slog.each(
            f"Capture cuda graph end. Time elapsed: {plan.graph_s:.2f} s. mem usage={graph_gb:.2f} GB. "  # noqa: E501
            f"avail mem={avail - graph_gb:.2f} GB."
        )
    else:
        slog.each(
            "Disable decode CUDA graph because cuda_graph_config resolved decode.backend='disabled' "  # noqa: E501
            "(e.g. via --cuda-graph-backend-decode=disabled or auto-disable rules)."
        )
    if not a2a_buffers_fit(rp):
        return None
    rp.publish("ready")
    slog.tp0(
        f"max_total_num_tokens={mem.max_total_num_tokens}, chunked_prefill_size={cfg.chunked_prefill_size}, "  # noqa: E501
        f"max_prefill_tokens={cfg.args.max_prefill_tokens}, max_running_requests={mem.max_running_requests}, "  # noqa: E501
        f"context_len={mem.context_length}, available_gpu_mem={avail:.2f} GB"
    )
    return phases
