"""The zero-delay server: a program (run by processes.zero_server in its own process).

``python zero_server.py HOST PORT`` (needs aiohttp): a zero-delay SGLang stand-in.
``POST /generate`` reads the whole body, counts the ``input_ids`` (commas, no JSON parse) and at
once writes one SGLang-shaped streamed chunk (non-empty ``text``, ``meta_info`` with
``prompt_tokens``, ``completion_tokens``, ``finish_reason``, ``request_received_ts``,
``response_sent_to_client_ts``) followed by ``data: [DONE]``. It also answers ``/health``,
``/v1/models``, ``/server_info``, ``/get_server_info`` and ``POST /flush_cache``.
"""

from __future__ import annotations

import sys
import time


def _count_ids(body: bytes) -> int:
    """Number of ``input_ids`` in a JSON body, counted without parsing it (0 when absent)."""
    start = body.find(b'"input_ids"')
    if start < 0:
        return 0
    open_ = body.find(b"[", start)
    close = body.find(b"]", open_)
    if open_ < 0 or close < 0:
        return 0
    inner = body[open_ + 1 : close]
    return 0 if not inner.strip() else inner.count(b",") + 1


def main(host: str, port: int) -> int:
    from aiohttp import web

    model = {"object": "list", "data": [{"id": "zero", "object": "model", "owned_by": "ppsweep"}]}
    headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    counter = iter(range(1 << 62))

    async def generate(request: web.Request) -> web.StreamResponse:
        received = time.time()
        body = await request.read()
        n = _count_ids(body)
        rid = f"z{next(counter)}"
        resp = web.StreamResponse(status=200, headers=headers)
        await resp.prepare(request)
        head = (
            b'data: {"text":" a","output_ids":[97],"meta_info":{"id":"%s","finish_reason":'
            b'{"type":"length","length":1},"prompt_tokens":%d,"completion_tokens":1,'
            b'"cached_tokens":0,"e2e_latency":0.0,"request_received_ts":%r,'
            % (rid.encode(), n, received)
        )
        await resp.write(
            head + b'"response_sent_to_client_ts":%r}}\n\ndata: [DONE]\n\n' % time.time()
        )
        await resp.write_eof()
        return resp

    async def ok(_request: web.Request) -> web.Response:
        return web.json_response({})

    async def models(_request: web.Request) -> web.Response:
        return web.json_response(model)

    async def info(_request: web.Request) -> web.Response:
        return web.json_response({"version": "zero", "internal_states": [{}]})

    app = web.Application(client_max_size=1 << 30)
    app.router.add_get("/health", ok)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/server_info", info)
    app.router.add_get("/get_server_info", info)
    app.router.add_post("/flush_cache", ok)
    app.router.add_post("/generate", generate)
    web.run_app(app, host=host, port=port, access_log=None, print=None, backlog=1024)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3:
        sys.exit(main(sys.argv[1], int(sys.argv[2])))
    sys.exit(f"usage: {sys.argv[0]} HOST PORT")
