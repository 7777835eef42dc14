"""A small aiohttp server streaming like SGLang's /generate and /v1/completions (contract §1.5-1.7).

It runs in its own thread and event loop, bound to 127.0.8.1 on an ephemeral port, so the code
under test uses real HTTP through ``run_round_sync``. Behaviour per request is chosen by the first
prompt id (``FakeSGLang.modes``), which lets one round mix successes and each kind of failure.
The server also counts its own concurrent requests, independently of the client.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

HOST = "127.0.8.1"
REFUSED_HOST = "127.0.8.2"


@dataclass
class FakeSGLang:
    """State and behaviour of the fake server; tests set fields before a round, read after.

    Modes: ok, empty_text (all text ""), stream_error (``data: {"error": ...}`` then [DONE]),
    abort (abort finish_reason), cut (connection dropped mid-stream), no_done (clean end without
    [DONE]), no_final ([DONE] without a finished chunk), http_500, hang (until the client leaves).
    """

    delay_s: float = 0.02
    modes: dict[int, str] = field(default_factory=dict)
    default_mode: str = "ok"
    flush_busy: int = 0  # answer 400 (busy) to this many /flush_cache calls first
    model: str = "fake-model"
    events: list[tuple[str, list[int]]] = field(default_factory=list)  # (route, prompt ids)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    base_url: str = ""
    release: asyncio.Event | None = None
    # A radix cache: a prompt's cached tokens are its longest common prefix with an earlier
    # prompt since the last flush (never the whole prompt), reported per request and, with
    # ``metrics``, in SGLang's cumulative /metrics counters (warm-ups counted too)
    prefix_cache: bool = False
    metrics: bool = False
    cached_total: int = 0
    prompt_total: int = 0
    _seen: list[list[int]] = field(default_factory=list)

    def _cached(self, ids: list[int]) -> int:
        if not self.prefix_cache:
            return 0
        best = 0
        for old in self._seen:
            n = 0
            for a, b in zip(old, ids, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        self._seen.append(ids)
        return min(best, len(ids) - 1)

    def ids_sent(self, route: str = "generate") -> list[list[int]]:
        """Prompt ids received on a route, in arrival order."""
        return [ids for r, ids in self.events if r == route]

    async def _serve(self, request: web.Request, route: str, ids: list[int],
                     build: Callable[[str], tuple[list[Any], Any]]) -> web.StreamResponse:
        """Answer one request per its mode; ``build(mode)`` gives the chunks and final chunk."""
        self.events.append((route, ids))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        left = False

        def leave() -> None:
            nonlocal left
            if not left:
                left, self.in_flight = True, self.in_flight - 1

        try:
            mode = self.modes.get(ids[0], self.default_mode)
            if mode == "hang":
                assert self.release is not None
                await asyncio.wait_for(self.release.wait(), 30)  # ends when the client hangs up
            await asyncio.sleep(self.delay_s)  # emulated prefill time
            if mode == "http_500":
                leave()
                return web.json_response({"error": {"message": "internal"}}, status=500)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)

            async def send(obj: Any) -> None:
                await resp.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

            chunks, final = build(mode)
            for chunk in chunks:
                await send(chunk)
            leave()  # before the last bytes: the client may send its next request after them
            if mode == "stream_error":
                await send({"error": {"message": "boom in stream"}})
            elif mode == "abort":
                await send({"text": "", "meta_info": {
                    "finish_reason": {"type": "abort", "message": "aborted"}}})
            elif mode == "cut":
                assert request.transport is not None
                await send({"text": "", "meta_info": {"finish_reason": None}})
                request.transport.close()  # dropped mid-stream, no chunk terminator
                return resp
            elif mode != "no_final":
                await send(final)
            if mode != "no_done":
                await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        finally:
            leave()

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        n, out = len(body["input_ids"]), body["sampling_params"]["max_new_tokens"]
        cached = self._cached(body["input_ids"])
        self.cached_total += cached
        self.prompt_total += n

        def build(mode: str) -> tuple[list[Any], Any]:
            text = "" if mode == "empty_text" else "t"  # a skipped special token gives ""
            meta = {"prompt_tokens": n, "cached_tokens": cached, "finish_reason": None}
            chunks = [{"text": text * (k + 1), "output_ids": list(range(k + 1)),
                       "meta_info": meta | {"completion_tokens": k + 1}} for k in range(out - 1)]
            final = {"text": text * out, "output_ids": list(range(out)), "meta_info": meta | {
                "completion_tokens": out, "e2e_latency": 0.5,
                "finish_reason": {"type": "length", "length": out}}}
            return chunks, final

        return await self._serve(request, "generate", body["input_ids"], build)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        n, out = len(body["prompt"]), body["max_tokens"]
        base = {"id": "x", "object": "text_completion", "created": 0, "model": body["model"]}

        def build(mode: str) -> tuple[list[Any], Any]:
            chunks = [base | {"usage": None, "choices": [{
                "index": 0, "text": "t", "finish_reason": "length" if k == out - 1 else None}]}
                for k in range(out)]
            usage = {"prompt_tokens": n, "completion_tokens": out, "total_tokens": n + out,
                     "prompt_tokens_details": {"cached_tokens": 0}}
            return chunks, base | {"choices": [], "usage": usage}

        return await self._serve(request, "completions", body["prompt"], build)

    async def metrics_page(self, request: web.Request) -> web.Response:
        """SGLang 0.5.23's counters as its /metrics writes them (404 without ``metrics``)."""
        if not self.metrics:
            return web.json_response({"detail": "Not Found"}, status=404)
        labels = 'model_name="fake-model",is_streaming="true"'
        return web.Response(text=(
            "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
            "# TYPE sglang:prompt_tokens_total counter\n"
            f"sglang:prompt_tokens_total{{{labels}}} {float(self.prompt_total)}\n"
            f"sglang:prompt_tokens_created{{{labels}}} 1.7e9\n"
            "# HELP sglang:cached_tokens_total Number of cached prompt tokens by source.\n"
            "# TYPE sglang:cached_tokens_total counter\n"
            + (f'sglang:cached_tokens_total{{model_name="fake-model",cache_source="device"}} '
               f"{float(self.cached_total)}\n" if self.cached_total else "")))

    async def flush_cache(self, request: web.Request) -> web.Response:
        self.events.append(("flush", []))
        if self.flush_busy > 0:
            self.flush_busy -= 1
            return web.Response(status=400, text="Flush cache failed.\n")
        self._seen.clear()
        return web.Response(text="Cache flushed.\n")

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model,
                                                              "object": "model"}]})


class _ServerThread:
    """Runs a FakeSGLang app in a background thread with its own event loop."""

    def __init__(self, fake: FakeSGLang) -> None:
        self.fake = fake
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.runner: web.AppRunner | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self.ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/generate", self.fake.generate)
        app.router.add_post("/v1/completions", self.fake.completions)
        app.router.add_route("*", "/flush_cache", self.fake.flush_cache)
        app.router.add_get("/v1/models", self.fake.models)
        app.router.add_get("/metrics", self.fake.metrics_page)
        self.fake.release = asyncio.Event()
        self.runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self.runner.setup()
        site = web.TCPSite(self.runner, HOST, 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.fake.base_url = f"http://{HOST}:{port}"

    async def _stop(self) -> None:
        assert self.fake.release is not None
        assert self.runner is not None
        self.fake.release.set()
        await self.runner.cleanup()

    def __enter__(self) -> FakeSGLang:
        self.thread.start()
        assert self.ready.wait(10), "fake server did not start"
        return self.fake

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
