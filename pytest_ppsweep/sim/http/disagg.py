"""``/generate`` of the two P/D roles (``--disaggregation-mode prefill|decode``).

Behind SGLang's P/D router each request reaches both servers at once with the same
``bootstrap_host`` / ``bootstrap_port`` / ``bootstrap_room`` (sim/http/pdrooms.py says how the
room's KV travels):

* **prefill**: computes the prompt and its first token (the prefill model of
  sim/model/scheduler.py; the request ends there, one token), waits for the decode server to ask
  for the room (at most ``SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT``), sends the KV (the link is
  booked for the modelled transfer time, sim/model/kvtransfer.py) and only then answers, as
  SGLang's prefill server releases a request once its KV sender reports success. The router
  passes the decode server's answer to the client, not this one.
* **decode**: waits for the room's KV (at most ``SGLANG_DISAGGREGATION_WAITING_TIMEOUT``, then
  aborts with SGLang's "Decode transfer failed" message as HTTP 500, or an error event in a
  stream), then runs the request with its prompt already in KV: it emits its first token for the
  cost of a sync and decodes the rest (sim/model/engine.py ``prefilled``), streaming as the
  aggregated server does. The client's TTFT is therefore prefill + transfer + that step.
* With the ``fake`` backend (decode only: SGLang refuses it on a prefill server), with the fake
  host ``2.2.2.2`` of SGLang's warmup, or with no ``bootstrap_host`` on a fake-backend server,
  nothing is awaited: decode runs at once over KV nobody computed (0.5.23
  disaggregation/utils.py ``_is_fake_transfer``; the outputs are meaningless, which
  ``/server_info``'s ``ppsweep_sim.outputs_meaningful`` states for a fake-backend server).
  A request without any bootstrap fields on a real backend is served the same way: the
  emulator's choice, SGLang's behaviour there is not modelled.

Timeouts are emulated seconds, shortened by the time scale like every other wait.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from ..model.kvtransfer import FAKE_BACKEND, transfer_s
from .api_generate import (
    DONE,
    SSE_HEADERS,
    Admitted,
    GenerateChunks,
    admit_generate,
    error_message,
    finished,
    json_response,
    meta_info,
    respond,
    start_job,
)
from .jsonfast import dumps
from .pdrooms import FAKE_BOOTSTRAP_HOST, receive_kv
from .state import ServerState


def _bootstrap(adm: Admitted) -> tuple[str | None, int | None, int | None]:
    """The request's (bootstrap_host, bootstrap_port, bootstrap_room)."""
    body = adm.body
    host, port, room = body.get("bootstrap_host"), body.get("bootstrap_port"), body.get(
        "bootstrap_room"
    )
    return (
        host if isinstance(host, str) else None,
        port if isinstance(port, int) else None,
        room if isinstance(room, int) else None,
    )


def is_fake_transfer(state: ServerState, host: str | None) -> bool:
    """No KV moves for this request (see the module docstring)."""
    return state.cfg.transfer_backend == FAKE_BACKEND or host in (None, FAKE_BOOTSTRAP_HOST)


async def _abort(request: web.Request, state: ServerState, adm: Admitted,
                 message: str) -> web.StreamResponse:
    """SGLang's answer to a request aborted with status 500: an error event in a stream, else
    HTTP 500 with the error object."""
    state.log.line(f"[scheduler] {message}")
    body = error_message(message, 500)
    if not adm.stream:
        return json_response(body, 500)
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await resp.prepare(request)
    await resp.write(b"data: " + dumps(body) + b"\n\n" + DONE)
    await resp.write_eof()
    return resp


async def handle_prefill_generate(request: web.Request) -> web.StreamResponse:
    """``/generate`` of a prefill server."""
    state: ServerState = request.app["state"]
    adm = await admit_generate(request, state)
    if isinstance(adm, web.StreamResponse):
        return adm
    settings = state.cfg.settings
    deadline = time.monotonic() + state.tb.real_s(settings.kv_bootstrap_timeout_s)
    host, _, room = _bootstrap(adm)
    job = start_job(state, adm, max_new=1)
    await finished(state, job)
    if not is_fake_transfer(state, host) and room is not None:
        board = state.board
        assert board is not None
        slot = board.room(room)
        joined = await _wait_event(slot.joined, deadline)
        if not joined:
            waited = settings.kv_bootstrap_timeout_s
            message = (
                f"Prefill bootstrap failed for request rank=0 req.rid={adm.rid!r} "
                f"req.bootstrap_room={room} with exception Request {room} timed out after "
                f"{waited:.1f}s in KVPoll.Bootstrapping"
            )
            board.fail(room, message)
            return await _abort(request, state, adm, message)
        duration = transfer_s(state.cfg.profile, adm.n_prompt, state.cfg.transfer_backend)
        await state.tb.sleep_until(board.link.book(state.tb.now(), duration))
        board.land(room, adm.n_prompt, duration)
    due = job.req.finish_time or 0.0
    if adm.stream:
        resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
        await resp.prepare(request)
        await resp.write(GenerateChunks(state, job).encode(due))
        await resp.write_eof()
        return resp
    return json_response(
        {"text": job.text, "output_ids": job.ids, "meta_info": meta_info(state, job, due,
                                                                          final=True)}
    )


async def _wait_event(event: asyncio.Event, deadline: float) -> bool:
    """Wait for ``event`` until ``time.monotonic()`` reaches ``deadline``; whether it was set."""
    left = deadline - time.monotonic()
    if event.is_set():
        return True
    if left <= 0:
        return False
    try:
        await asyncio.wait_for(event.wait(), left)
    except TimeoutError:
        return False
    return True


async def handle_decode_generate(request: web.Request) -> web.StreamResponse:
    """``/generate`` of a decode server."""
    state: ServerState = request.app["state"]
    adm = await admit_generate(request, state)
    if isinstance(adm, web.StreamResponse):
        return adm
    host, port, room = _bootstrap(adm)
    if not is_fake_transfer(state, host):
        assert host is not None
        waited = state.cfg.settings.kv_waiting_timeout_s
        deadline = time.monotonic() + state.tb.real_s(waited)
        landed = None
        if port is not None and room is not None:
            landed = await receive_kv(state.pd_session(), host, port, room, deadline)
        if landed is None or landed.get("status") != "landed":
            reason = (
                f"Request {room} timed out after {waited:.1f}s in KVPoll.WaitingForInput"
                if landed is None else str(landed.get("error"))
            )
            return await _abort(
                request, state, adm,
                f"Decode transfer failed for request rank=0 decode_req.req.rid={adm.rid!r} "
                f"decode_req.req.bootstrap_room={room} with exception {reason}",
            )
    return await respond(request, state, adm, start_job(state, adm, prefilled=True))

