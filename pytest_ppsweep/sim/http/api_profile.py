"""``/start_profile`` and ``/stop_profile``: SGLang's profile window on the emulator.

The body is SGLang's ``ProfileReq`` (sglang/srt/managers/io_struct.py): ``output_dir`` (default
``$SGLANG_TORCH_PROFILER_DIR`` or ``/tmp``), ``num_steps`` (the window stops by itself after that
many forward steps of each rank; ``/stop_profile`` then answers 500 "not in progress", as
SGLang's RuntimeError does), ``activities``, ``profile_prefix``, ``profile_id`` (default the
time). The traces come from the scheduler's ticks (sim/model/tracerec.py). Fault
``profile_missing@node=N``: node N writes no trace.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from ..model.tracerec import TraceRecorder
from .state import ServerState

START_OK = "Start profiling.\n"
STOP_OK = "Stop profiling. This will take some time.\n"
KEYS = ("output_dir", "num_steps", "activities", "profile_prefix", "profile_id", "start_step",
        "profile_by_stage", "with_stack", "record_shapes", "merge_profiles", "profile_stages")


def _state(request: web.Request) -> ServerState:
    state: ServerState = request.app["state"]
    return state


def _error(message: str) -> web.Response:
    return web.Response(status=500, text=f"Internal Server Error: {message}\n")


async def start_profile(request: web.Request) -> web.Response:
    state = _state(request)
    engine = state.engine
    body: Any = await request.json() if request.can_read_body else {}
    if body is None:
        body = {}
    if not isinstance(body, dict) or set(body) - set(KEYS):
        extra = sorted(set(body) - set(KEYS)) if isinstance(body, dict) else body
        return web.json_response({"detail": f"ProfileReq: unexpected {extra!r}"}, status=422)
    if engine is None:
        return _error("the engine is not up")
    sched = engine.sched
    if sched.recorder is not None and not sched.recorder.written:
        return _error("Profiling is already in progress. Call /stop_profile first.")
    steps = body.get("num_steps")
    if steps is not None and (not isinstance(steps, int) or steps < 1):
        return web.json_response({"detail": f"num_steps: expected an integer, found {steps!r}"},
                                 status=422)
    out = Path(body.get("output_dir") or os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp"))
    profile_id = str(body.get("profile_id") or time.time())
    missing = state.cfg.settings.faults.get("profile_missing")
    nnodes = state.cfg.args.nnodes
    skip = () if missing is None else (nnodes - 1 if missing.rank is None else missing.rank,)
    sched.recorder = TraceRecorder(
        sched.cost,
        nnodes,
        out.expanduser(),
        profile_id,
        prefix=str(body.get("profile_prefix") or ""),
        num_steps=steps,
        skip_nodes=skip,
        on_done=lambda files: state.slog.first(f"Profiling done. Traces are saved to: {out}"),
    )
    state.slog.first(
        f"Profiling starts. Traces will be saved to: {out} (with profile id: {profile_id})"
    )
    return web.Response(status=200, text=START_OK)


async def stop_profile(request: web.Request) -> web.Response:
    state = _state(request)
    engine = state.engine
    rec = engine.sched.recorder if engine is not None else None
    if rec is None or rec.written:
        return _error("Profiling is not in progress. Call /start_profile first.")
    state.slog.first("Stop profiling...")
    rec.write()
    return web.Response(status=200, text=STOP_OK)


def add_profile_routes(app: web.Application) -> None:
    """GET and POST, as SGLang's ``@app.api_route(..., methods=["GET", "POST"])``."""
    for method in ("GET", "POST"):
        app.router.add_route(method, "/start_profile", start_profile)
        app.router.add_route(method, "/stop_profile", stop_profile)
