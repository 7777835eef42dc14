"""Garbage servers: a small real aiohttp server on 127.0.0.1 answers each request with one kind
of garbage, and measure/bench.py's round must turn each into a failed request with its reason,
within request_timeout_s; setup endpoints (/flush_cache, /v1/models) into BenchSetupError. Never
a hang, never another exception. ``OUTCOMES`` is what docs/RELIABILITY.md tabulates."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from pytest_ppsweep.measure.bench import BenchSetupError, run_round
from pytest_ppsweep.measure.completion import result_problems
from pytest_ppsweep.measure.workload import WorkloadSpec, generate_prompts

TIMEOUT_S = 1.0  # request_timeout_s of every round here
SLACK_S = 1.5  # what a round may take beyond it (connect, teardown)
OUTCOMES: dict[str, str] = {}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SSE = {"Content-Type": "text/event-stream"}


async def _sse(request: web.Request, *chunks: bytes, cut: bool = False) -> web.StreamResponse:
    resp = web.StreamResponse(headers=SSE)
    await resp.prepare(request)
    for chunk in chunks:
        await resp.write(chunk)
    if cut:  # the connection dies mid-event: no final chunk of the chunked encoding
        assert request.transport is not None
        request.transport.abort()
        return resp
    await resp.write_eof()
    return resp


async def slow_loris(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers=SSE)
    await resp.prepare(request)
    for _ in range(600):  # one byte every 50 ms, never a full line
        await resp.write(b":")
        await asyncio.sleep(0.05)
    return resp


async def no_headers(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(60)
    return web.Response()


async def reset(request: web.Request) -> web.StreamResponse:
    assert request.transport is not None
    request.transport.abort()
    return web.Response()


GOOD_FINAL = b'data: {"text": "x", "meta_info": {"finish_reason": {"type": "length"}}}\n\n'
# asked 1 completion token (output_len = 1, ignore_eos), the server decodes 3 and says so
TOO_MANY = (b'data: {"text": "a", "meta_info": {"prompt_tokens": 8, "completion_tokens": 1}}\n\n'
            b'data: {"text": "abc", "meta_info": {"prompt_tokens": 8, "completion_tokens": 3, '
            b'"finish_reason": {"type": "length"}}}\n\ndata: [DONE]\n\n')
TOO_MANY_OAI = (b'data: {"choices": [{"text": "a", "finish_reason": null}]}\n\n'
                b'data: {"choices": [{"text": "bc", "finish_reason": "length"}]}\n\n'
                b'data: {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": 3}}'
                b'\n\ndata: [DONE]\n\n')
GENERATE: dict[str, tuple[Handler, str]] = {
    "non-JSON event": (lambda r: _sse(r, b"data: <html>oops</html>\n\n"), "bad stream"),
    "truncated JSON event": (lambda r: _sse(r, b'data: {"meta_info": {"fin\n\n'), "bad stream"),
    "event not an object": (lambda r: _sse(r, b"data: [1, 2]\n\n"), "bad stream"),
    "meta_info not an object": (lambda r: _sse(r, b'data: {"meta_info": [1]}\n\n'),
                                "bad stream"),
    "finish_reason of a wrong shape": (
        lambda r: _sse(r, b'data: {"meta_info": {"finish_reason": {"type": ["abort"]}}}\n\n'
                          b"data: [DONE]\n\n"), "bad stream"),
    "JSON nested 100,000 deep": (lambda r: _sse(r, b"data: " + b"[" * 100_000 + b"\n\n"),
                                 "bad stream"),
    "binary garbage": (lambda r: _sse(r, b"data: \xff\xfe\x00\x80garbage\n\n"), "bad stream"),
    "stream cut mid-event": (lambda r: _sse(r, b'data: {"text": "a"}\n\ndata: {"te', cut=True),
                             "truncated stream"),
    "stream ends without [DONE]": (lambda r: _sse(r, GOOD_FINAL), "truncated stream"),
    "[DONE] without a final chunk": (lambda r: _sse(r, b'data: {"text": "a"}\n\ndata: [DONE]\n\n'),
                                     "truncated stream"),
    "HTTP 500": (lambda r: asyncio.sleep(0, web.Response(status=500, text="Internal")),
                 "http 500"),
    "HTTP 500 with a 5 MB body": (
        lambda r: asyncio.sleep(0, web.Response(status=500, body=b"e" * 5_000_000)), "http 500"),
    "HTTP 503 HTML page": (
        lambda r: asyncio.sleep(0, web.Response(status=503, text="<h1>busy</h1>",
                                                content_type="text/html")), "http 503"),
    "slow-loris stream": (slow_loris, "timeout"),
    "no response headers": (no_headers, "timeout"),
    "connection reset before answering": (reset, "connection error"),
    "huge response headers (100 KB)": (
        lambda r: asyncio.sleep(0, web.Response(text="x", headers={"X-Big": "a" * 100_000})),
        "connection error"),
    "wrong content type (HTML, 200)": (
        lambda r: asyncio.sleep(0, web.Response(text="<html>hi</html>", content_type="text/html")),
        "truncated stream"),
    "more completion tokens than asked": (lambda r: _sse(r, TOO_MANY), "wrong output length"),
    "JSON instead of SSE (200)": (
        lambda r: asyncio.sleep(0, web.json_response({"text": "x", "meta_info": {}})),
        "truncated stream"),
}
COMPLETIONS: dict[str, tuple[Handler, str]] = {
    "choices not objects": (lambda r: _sse(r, b'data: {"choices": [1, "x"]}\n\n'), "bad stream"),
    "usage not an object": (lambda r: _sse(r, b'data: {"choices": [], "usage": [3]}\n\n'),
                            "bad stream"),
    "choices not a list": (lambda r: _sse(r, b'data: {"choices": 7}\n\n'), "bad stream"),
    "more completion tokens than asked": (lambda r: _sse(r, TOO_MANY_OAI),
                                          "wrong output length"),
}


async def _ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _models(request: web.Request) -> web.Response:
    return web.json_response({"data": [{"id": "m"}]})


async def _serve(routes: list[web.RouteDef]) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def spec(api: str = "generate") -> WorkloadSpec:
    return WorkloadSpec(input_len=8, output_len=1, range_ratio=1.0, num_requests=2, seed=3,
                        vocab_size=100, warmup_requests=0, api=api,
                        request_timeout_s=TIMEOUT_S, round_timeout_s=10.0)


def _coroutine(handler: Handler) -> Handler:
    """aiohttp wants coroutine functions (the table's lambdas return awaitables)."""

    async def route(request: web.Request) -> web.StreamResponse:
        return await handler(request)

    return route


def _round(handler: Handler, api: str, **routes: Handler) -> tuple[Any, float]:
    async def main() -> tuple[Any, float]:
        path = "/generate" if api == "generate" else "/v1/completions"
        defs = [web.post(path, _coroutine(handler)),
                web.post("/flush_cache", _coroutine(routes.get("flush", _ok))),
                web.get("/v1/models", _coroutine(routes.get("models", _models)))]
        runner, url = await _serve(defs)
        try:
            s = spec(api)
            t = time.monotonic()
            try:
                result: Any = await run_round(url, generate_prompts(s), 2, spec=s,
                                              flush_timeout_s=TIMEOUT_S)
            except BenchSetupError as exc:
                result = exc
            return result, time.monotonic() - t
        finally:
            await runner.cleanup()

    return asyncio.run(main())


@pytest.mark.parametrize(("api", "case"), [("generate", c) for c in GENERATE]
                         + [("completions", c) for c in COMPLETIONS])
def test_garbage_answer_is_a_failed_request_with_its_reason(api: str, case: str) -> None:
    handler, kind = (GENERATE if api == "generate" else COMPLETIONS)[case]
    r, took = _round(handler, api)
    assert took < TIMEOUT_S + SLACK_S, f"{case}: the round took {took:.1f} s"
    assert not isinstance(r, BenchSetupError), r
    assert (r.completed, r.failed) == (0, 2), (case, r.errors)
    assert dict(r.errors) == {kind: 2}, (case, r.errors)
    OUTCOMES[f"/generate: {case}" if api == "generate" else f"/v1/completions: {case}"] = (
        f"failed request, {kind!r}")


async def _flush_500(request: web.Request) -> web.Response:
    return web.Response(status=500, text="no")


async def _garbage_models(request: web.Request) -> web.Response:
    return web.Response(text="{not json", content_type="application/json")


async def _truncated_models(request: web.Request) -> web.Response:
    return web.Response(text='{"data": [{"id": "m"', content_type="application/json")


async def _empty_models(request: web.Request) -> web.Response:
    return web.json_response({"data": []})


SETUP: dict[str, dict[str, Handler]] = {
    "/flush_cache HTTP 500": {"flush": _flush_500},
    "/flush_cache slow-loris": {"flush": slow_loris},
    "/flush_cache no response headers": {"flush": no_headers},
    "/v1/models non-JSON": {"models": _garbage_models},
    "/v1/models truncated JSON": {"models": _truncated_models},
    "/v1/models no model listed": {"models": _empty_models},
    "/v1/models slow-loris": {"models": slow_loris},
}


@pytest.mark.parametrize("case", list(SETUP))
def test_garbage_setup_answer_is_a_setup_error(case: str) -> None:
    r, took = _round(GENERATE["HTTP 500"][0], "completions", **SETUP[case])
    assert took < TIMEOUT_S + SLACK_S, f"{case}: the round took {took:.1f} s"
    assert isinstance(r, BenchSetupError), r
    assert str(r), r
    OUTCOMES[case] = f"BenchSetupError: {str(r)[:60]}"


@pytest.mark.parametrize("api", ["generate", "completions"])
def test_more_completion_tokens_than_asked_fail_the_round(api: str) -> None:
    """A server that decodes 3 tokens where 1 was asked (ignore_eos) is not the workload that
    was asked: each request fails naming asked and got, and the N/N rule refuses the round."""
    handler = _sse_of(TOO_MANY if api == "generate" else TOO_MANY_OAI)
    r, _took = _round(handler, api)
    assert {rec["error"] for rec in r.records} == {"asked 1 completion token(s), got 3"}
    assert [rec["completion_tokens"] for rec in r.records] == [3, 3]  # what was received
    assert [p.text for p in result_problems(r)] == ["0/2 completed", "2 failed request(s)"]
    assert r.output_tokens_nominal == 0 and r.output_tokens == 0


def _sse_of(body: bytes) -> Handler:
    return lambda r: _sse(r, body)


def test_asked_completion_tokens_pass() -> None:
    """The same server asked for the 3 tokens it produces: every request counts."""
    def run() -> Any:
        async def main() -> Any:
            runner, url = await _serve([web.post("/generate", _coroutine(_sse_of(TOO_MANY))),
                                        web.post("/flush_cache", _ok)])
            try:
                s = WorkloadSpec(input_len=8, output_len=3, range_ratio=1.0, num_requests=2,
                                 seed=3, vocab_size=100, warmup_requests=0,
                                 request_timeout_s=TIMEOUT_S, round_timeout_s=10.0)
                return await run_round(url, generate_prompts(s), 2, spec=s)
            finally:
                await runner.cleanup()
        return asyncio.run(main())

    r = run()
    assert (r.completed, r.output_tokens, r.output_tokens_nominal) == (2, 6, 6)
    assert result_problems(r) == []
