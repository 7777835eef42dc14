"""aiohttp apps: rank 0's SGLang API and the dummy health server of ranks >= 1.

Both log every request like uvicorn (``INFO:     ip:port - "GET /health HTTP/1.1" 503 Service
Unavailable``) and answer unknown paths like FastAPI (404 ``{"detail":"Not Found"}``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http import HTTPStatus

from aiohttp import web
from aiohttp.typedefs import Middleware

from ..launch.logfmt import SimLog
from ..launch.settings import BOOT_TOKEN_HEADER
from ..model.prometheus import render_gauges
from .api_generate import handle_generate, json_response
from .api_info import model_info, models_list, server_info
from .api_openai import handle_completions
from .api_profile import add_profile_routes
from .disagg import handle_decode_generate, handle_prefill_generate
from .state import ServerState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
FLUSH_OK = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running "
    "or waiting requests, the operation will not be performed.)\n"
)
OPEN_PATHS = ("/health", "/health_generate", "/ping", "/metrics")


def make_access_log(log: SimLog) -> Middleware:
    """Middleware: uvicorn-style access lines and FastAPI-style 404/405 bodies."""

    @web.middleware
    async def access(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            resp = await handler(request)
        except web.HTTPNotFound:
            resp = json_response({"detail": "Not Found"}, 404)
        except web.HTTPMethodNotAllowed:
            resp = json_response({"detail": "Method Not Allowed"}, 405)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        who = f"{peer[0]}:{peer[1]}" if peer else "-"
        reason = (
            HTTPStatus(resp.status).phrase if resp.status in HTTPStatus._value2member_map_ else ""
        )
        log.line(
            f'INFO:     {who} - "{request.method} {request.path_qs} HTTP/1.1" {resp.status} {reason}'  # noqa: E501
        )
        return resp

    return access


def make_boot_token(token: str) -> Middleware:
    """Middleware: every answer carries this boot's token (PPSWEEP_BOOT_TOKEN), if given."""

    @web.middleware
    async def echo(request: web.Request, handler: Handler) -> web.StreamResponse:
        resp = await handler(request)
        if token:
            resp.headers[BOOT_TOKEN_HEADER] = token
        return resp

    return echo


def make_api_key(key: str | None) -> Middleware:
    """Middleware: ``Authorization: Bearer <api-key>`` on everything but health/metrics."""

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        guarded = key and request.method != "OPTIONS" and not request.path.startswith(OPEN_PATHS)
        if guarded and request.headers.get("Authorization") != f"Bearer {key}":
            return json_response({"error": "Unauthorized"}, 401)
        return await handler(request)

    return auth


def _state(request: web.Request) -> ServerState:
    state: ServerState = request.app["state"]
    return state


async def health(request: web.Request) -> web.Response:
    """``/health`` and ``/health_generate``: 503 while starting or shutting down, else 200."""
    state = _state(request)
    if state.status == "Shutdown":
        state.log.line("Health check request received during shutdown. Returning 503.")
        return web.Response(status=503)
    return web.Response(status=200 if state.status == "Up" else 503)


async def ping(request: web.Request) -> web.Response:
    """``/ping``: liveness, always 200 with an empty body."""
    return web.Response(status=200)


def _server_info_payload(state: ServerState) -> web.Response:
    engine = state.engine
    return json_response(
        server_info(
            state.cfg,
            startup=state.startup,
            pp_micro=state.pp_micro,
            last_gen_throughput=engine.sched.last_gen_throughput if engine else 0.0,
        )
    )


async def get_server_info(request: web.Request) -> web.Response:
    """``/server_info``."""
    return _server_info_payload(_state(request))


async def get_server_info_deprecated(request: web.Request) -> web.Response:
    """``/get_server_info``: deprecated alias that logs a warning."""
    state = _state(request)
    state.log.line(
        "Endpoint '/get_server_info' is deprecated and will be removed in a future "
        "version. Please use '/server_info' instead."
    )
    return _server_info_payload(state)


async def get_model_info(request: web.Request) -> web.Response:
    """``/model_info`` (and the deprecated ``/get_model_info``)."""
    state = _state(request)
    if request.path == "/get_model_info":
        state.log.line(
            "Endpoint '/get_model_info' is deprecated and will be removed in a future "
            "version. Please use '/model_info' instead."
        )
    return json_response(model_info(state.cfg))


async def v1_models(request: web.Request) -> web.Response:
    """``/v1/models``."""
    state = _state(request)
    return json_response(models_list(state.cfg, state.created_unix))


async def flush_cache(request: web.Request) -> web.Response:
    """``/flush_cache``: refused (400) while requests are running or waiting."""
    state = _state(request)
    engine = state.engine
    timeout = float(request.query.get("timeout", "0") or 0)
    deadline = state.tb.now() + timeout
    while engine is not None and engine.sched.busy() and state.tb.now() < deadline:
        await state.tb.sleep(min(1.0, deadline - state.tb.now()))
    if engine is not None and engine.sched.busy():
        state.log.line(
            "Cache not flushed because there are pending requests. "
            f"#queue-req: {len(engine.sched.queue)}, #running-req: {engine.sched.num_running()}"
        )
        return web.Response(status=400, text="Flush cache failed.\n")
    state.slog.first("Cache flushed successfully!")
    return web.Response(status=200, text=FLUSH_OK)


async def set_internal_state(request: web.Request) -> web.Response:
    """``/set_internal_state``: runtime ``pp_max_micro_batch_size`` within [1, mrr // pp]."""
    state = _state(request)
    body = await request.json()
    wanted = (body.get("server_args") or {}) if isinstance(body, dict) else {}
    hi = max(state.cfg.mem.max_running_requests // state.cfg.layout.pp, 1)
    updated = False
    if set(wanted) == {"pp_max_micro_batch_size"}:
        value = wanted["pp_max_micro_batch_size"]
        if isinstance(value, int) and 1 <= value <= hi:
            state.pp_micro_override = value
            if state.engine is not None:
                state.engine.sched.max_micro = value
                state.engine.driver.poke()
            updated = True
        else:
            state.slog.first(
                f"Updating pp_max_micro_batch_size to {value} is rejected because it is "
                f"out of the valid range [1, {hi}]."
            )
    info = server_info(
        state.cfg, startup=state.startup, pp_micro=state.pp_micro, last_gen_throughput=0.0
    )
    return json_response({"updated": updated, "server_args": info["internal_states"][0]})


async def metrics(request: web.Request) -> web.Response:
    """``/metrics`` (only with ``--enable-metrics``)."""
    state = _state(request)
    engine = state.engine
    if not state.cfg.args.enable_metrics or engine is None:
        return json_response({"detail": "Not Found"}, 404)
    return web.Response(text=engine.metrics.render(engine.gauges()), content_type="text/plain")


def build_rank0_app(state: ServerState) -> web.Application:
    """Rank 0's full API."""
    app = web.Application(
        middlewares=[
            make_boot_token(state.cfg.settings.boot_token),
            make_access_log(state.log),
            make_api_key(state.cfg.args.api_key),
        ],
        client_max_size=64 * 1024 * 1024,
    )
    app["state"] = state
    r = app.router
    for path in ("/health", "/health_generate"):
        r.add_get(path, health)
    r.add_get("/ping", ping)
    r.add_get("/server_info", get_server_info)
    r.add_get("/get_server_info", get_server_info_deprecated)
    r.add_get("/model_info", get_model_info)
    r.add_get("/get_model_info", get_model_info)
    r.add_get("/v1/models", v1_models)
    generate = {"prefill": handle_prefill_generate, "decode": handle_decode_generate}.get(
        state.cfg.args.disaggregation_mode, handle_generate
    )
    r.add_post("/generate", generate)
    r.add_put("/generate", generate)
    r.add_post("/v1/completions", handle_completions)
    r.add_get("/flush_cache", flush_cache)
    r.add_post("/flush_cache", flush_cache)
    r.add_post("/set_internal_state", set_internal_state)
    r.add_get("/metrics", metrics)
    add_profile_routes(app)

    async def close_session(app: web.Application) -> None:
        if state.session is not None:
            await state.session.close()

    app.on_cleanup.append(close_session)
    return app


def build_dummy_app(
    log: SimLog, enable_metrics: bool, model_name: str, pp_rank: int, boot_token: str = ""
) -> web.Application:
    """Ranks >= 1: ``/health``, ``/health_generate``, ``/ping`` (200, empty); 404 elsewhere."""
    app = web.Application(middlewares=[make_boot_token(boot_token), make_access_log(log)])
    for path in ("/health", "/health_generate", "/ping"):
        app.router.add_get(path, ping)

    async def node_metrics(request: web.Request) -> web.Response:
        gauges = {"num_running_reqs": 0.0, "num_queue_reqs": 0.0, "token_usage": 0.0}
        return web.Response(
            text="\n".join(render_gauges(gauges, model_name, pp_rank)) + "\n",
            content_type="text/plain",
        )

    if enable_metrics:
        app.router.add_get("/metrics", node_metrics)
    return app
