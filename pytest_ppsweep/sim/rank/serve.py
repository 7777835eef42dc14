"""Serving phase: rank 0's HTTP API with the emulated warmup, or a follower's dummy server.

Rank 0 opens its HTTP port only once every rank reported ready (connections are refused before),
answers ``/health`` 503 while ``Starting``, runs the warmup request through the emulated
pipeline and only then turns ``Up`` (200) and logs ``The server is fired up and ready to roll!``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import random
import time

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage

from ..http.api_app import build_dummy_app, build_rank0_app
from ..http.pdrooms import RoomBoard, build_bootstrap_app
from ..http.state import ServerState
from ..launch import faultlog
from ..model.costmodel import CostModel
from ..model.engine import Engine
from ..model.prometheus import Metrics
from ..model.scheduler import PPScheduler
from .handover import Phases, hang_seconds, pid
from .node import RankProcess

WARMUP_PROMPT = "The capital city of France is"


class _InvalidRequests(logging.Filter):
    """What an emulated rank logs for a request it cannot parse (an HTTP/2 connection preface:
    sglang-router tries gRPC and HTTP/2 on every server before HTTP/1.1): SGLang's uvicorn logs
    one warning line, ``WARNING:  Invalid HTTP request received.``; aiohttp would log an error
    with its traceback, which the log scan rightly takes for a crash."""

    def __init__(self, rp: RankProcess) -> None:
        super().__init__()
        self.rp = rp

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, BadHttpMessage):
            self.rp.log.line("WARNING:  Invalid HTTP request received.")
            return False
        return True


def _quiet_invalid_requests(rp: RankProcess) -> None:
    logging.getLogger("aiohttp.server").addFilter(_InvalidRequests(rp))


async def serve_follower(rp: RankProcess) -> None:
    """Rank >= 1: report ready, start the dummy health server, then idle until told to stop."""
    assert rp.client is not None
    rp.client.send({"type": "ready"})
    a = rp.cfg.args
    app = build_dummy_app(
        rp.log,
        a.enable_metrics,
        rp.cfg.served_model_name,
        rp.schedulers[0].pp_rank if rp.schedulers else 0,
        rp.cfg.settings.boot_token,
    )
    _quiet_invalid_requests(rp)
    rp.runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await rp.runner.setup()
    await web.TCPSite(rp.runner, a.host, a.port, reuse_address=True).start()
    rp.log.line(f"Dummy health check server started in background thread at {a.host}:{a.port}")
    await asyncio.Event().wait()


def _on_finished(rp: RankProcess, engine: Engine, completed: int) -> None:
    """After each request: share progress (peak activation, crash fault) with the other ranks."""
    rp.peak_tokens = max(rp.peak_tokens, engine.sched.peak_tokens)
    rp.stage_busy_s = list(engine.sched.stage_busy_s)
    rp.publish("ready")  # the memory of a new peak, the busy seconds of this request
    if rp.server is not None:
        rp.server.broadcast(
            {"type": "progress", "completed": completed, "peak_tokens": rp.peak_tokens,
             "stage_busy_s": rp.stage_busy_s}
        )
    crash = rp.faults.get("crash_mid_bench")
    if crash is not None and rp.cfg.args.nnodes == 1 and completed >= crash.number():
        rp.fail(
            faultlog.scheduler_exception(
                [], "RuntimeError: CUDA error: an illegal memory access was encountered"
            ),
            per_scheduler=False,
        )


def boot_offset(sigma_pct: float) -> float:
    """This boot's log offset: normal with σ log(1 + sigma_pct / 100), drawn from the OS's
    randomness (a boot's offset is not reproducible by the run's seed: that is what the spread
    between boots is); 0 when the profile models none."""
    if sigma_pct <= 0:
        return 0.0
    return random.SystemRandom().gauss(0.0, math.log1p(sigma_pct / 100.0))


async def serve_rank0(rp: RankProcess, phases: Phases) -> None:
    """Rank 0: wait for every rank, open the API, warm up, serve."""
    cfg, a = rp.cfg, rp.cfg.args
    if rp.server is not None:
        server = rp.server
        if not await server.wait_for(
            lambda: len(server.ready) >= a.nnodes, cfg.dist_timeout_real_s()
        ):
            rp.fail(faultlog.store_timeout_error(cfg.dist_timeout_s, len(server.ready), a.nnodes))
            return
        phases.restart()
    plan = cfg.boot
    sched = PPScheduler(
        CostModel(cfg.profile, cfg.layout, cfg.args.moe_a2a_backend),
        chunked_prefill_size=cfg.chunked_prefill_size,
        pp_max_micro_batch_size=cfg.pp_max_micro_batch_size,
        kv_capacity=cfg.mem.max_total_num_tokens,
        seed=cfg.settings.seed,
        log=rp.slog.first,
        boot_offset=boot_offset(cfg.profile.scheduler.boot_offset_pct),
    )
    fail = rp.faults.get("fail_requests")
    nth = frozenset(int(f.number()) for f in rp.faults.faults if f.name == "fail_request_n")
    state = ServerState(cfg=cfg, tb=rp.tb, log=rp.log, slog=rp.slog, created_unix=int(time.time()))
    engine = Engine(
        sched,
        rp.tb,
        vocab=cfg.profile.model.vocab_size,
        metrics=Metrics(cfg.served_model_name),
        fail_fraction=fail.number() if fail else 0.0,
        seed=cfg.settings.seed,
        on_finished=lambda n: _on_finished(rp, engine, n),
        fail_nth=nth,
    )
    state.engine = engine
    scheduler_e2e = plan.dist_init_s + plan.load_s + plan.kv_alloc_s + plan.graph_s
    state.startup = {
        "load_weight": plan.load_s,
        "kv_cache_allocation": plan.kv_alloc_s,
        "scheduler_e2e": scheduler_e2e,
        "cuda_graph": {
            "prefill": 0.0,
            "decode": plan.graph_s,
            "target_verify": 0.0,
            "draft_prefill": 0.0,
            "draft_decode": 0.0,
            "draft_extend": 0.0,
        },
        "tokenizer_e2e": rp.tb.now(),
    }
    rp.log.line(
        f"Engine startup timings (s): load_weight={plan.load_s:.2f}, kv_cache_allocation="
        f"{plan.kv_alloc_s:.2f}, scheduler_e2e={scheduler_e2e:.2f}, cuda_graph={{prefill=0.00, "
        f"decode={plan.graph_s:.2f}}}, tokenizer_e2e={rp.tb.now():.2f}"
    )
    if a.disaggregation_mode == "prefill":
        await _start_bootstrap(rp, state)
    _quiet_invalid_requests(rp)
    rp.runner = web.AppRunner(build_rank0_app(state), access_log=None, handle_signals=False)
    await rp.runner.setup()
    await web.TCPSite(rp.runner, a.host, a.port, reuse_address=True).start()
    rp.log.lines(
        [
            f"INFO:     Started server process [{pid()}]",
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
            f"INFO:     Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)",
        ]
    )
    if not a.skip_server_warmup and not await _warmup(rp, state, engine, phases):
        return
    gc.collect()
    gc.freeze()  # like SGLang's /freeze_gc: no long GC pauses on boot-time objects while serving
    state.status = "Up"
    rp.log.line("The server is fired up and ready to roll!")
    await asyncio.Event().wait()


async def _start_bootstrap(rp: RankProcess, state: ServerState) -> None:
    """A P/D prefill server's bootstrap listener on the head node (sim/http/pdrooms.py), up
    before the API as SGLang starts it with the tokenizer manager."""
    cfg, a = rp.cfg, rp.cfg.args
    settings = cfg.settings
    state.board = RoomBoard(
        rp.tb.real_s(settings.kv_bootstrap_timeout_s + settings.kv_waiting_timeout_s)
    )
    rp.bootstrap_runner = web.AppRunner(
        build_bootstrap_app(state.board), access_log=None, handle_signals=False
    )
    await rp.bootstrap_runner.setup()
    await web.TCPSite(
        rp.bootstrap_runner, a.host, a.disaggregation_bootstrap_port, reuse_address=True
    ).start()
    rp.log.line(f"KV bootstrap server started at {a.host}:{a.disaggregation_bootstrap_port}")


async def _warmup(rp: RankProcess, state: ServerState, engine: Engine, phases: Phases) -> bool:
    """SGLang's ``_wait_and_warmup``: poll model info, one generate through the pipeline."""
    a = rp.cfg.args
    rp.log.line(f'INFO:     127.0.0.1:{a.port + 17} - "GET /model_info HTTP/1.1" 200 OK')
    phases.restart()
    hang = hang_seconds(rp)
    if hang is not None:
        if a.watchdog_timeout < hang:
            await phases.wait(a.watchdog_timeout)
            for record in faultlog.watchdog_lines(a.watchdog_timeout):
                rp.slog.each(record)
            rp.log.line(faultlog.SIGQUIT_LINE)
            rp.log.line("Killed")
            rp.finish(1)
            return False
        await phases.wait(hang)
    await phases.wait(rp.cfg.boot.warmup_jit_s)
    # in P/D, SGLang's warmup names the fake bootstrap host: a prefill server computes its one
    # token and sends nothing, a decode server decodes at once (sim/http/disagg.py)
    mode = a.disaggregation_mode
    job = engine.start("warmup", len(WARMUP_PROMPT.split()), 1 if mode == "prefill" else 8,
                       time.time(), log_metrics=False, prefilled=mode == "decode")
    while not job.req.finished:
        await job.outputs.get()
    rp.log.line(f'INFO:     127.0.0.1:{a.port + 18} - "POST /generate HTTP/1.1" 200 OK')
    rp.log.line(f'INFO:     127.0.0.1:{a.port + 19} - "POST /freeze_gc HTTP/1.1" 200 OK')
    return True
