"""The KV hand-off between an emulated P/D prefill server and decode server, by bootstrap room.

SGLang's P/D router gives the prefill and the decode server the same request, with the prefill
server's ``bootstrap_host``, ``bootstrap_port`` and a random ``bootstrap_room``. The decode
server contacts the prefill's bootstrap server (an aiohttp server on
``--disaggregation-bootstrap-port`` of the prefill head node, 0.5.23
disaggregation/common/conn.py: ``/route``, ``/health`` "OK"), hands over where the KV must go,
and the prefill server writes the room's KV there once its prefill is done; the decode side polls
until it landed (``SGLANG_DISAGGREGATION_WAITING_TIMEOUT``), the prefill side gives up when no
decode asked for the room (``SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT``).

The emulator keeps the rooms on the prefill head's bootstrap listener (:class:`RoomBoard`) and
lets the listener stand for the RDMA write as well: the decode server long-polls
``GET /ppsweep/kv/{room}`` (the emulator's own path, next to SGLang's ``/health``). The first poll
is the handshake (the room's ``joined``); the prefill server sets ``landed`` once its prefill is
done and the modelled transfer time has passed (sim/model/kvtransfer.py), and the poll answers
``{"status": "landed", ...}``. Each poll waits at most ``POLL_REAL_S`` and the decode side polls
again until its own deadline: every wait is bounded.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from ..model.kvtransfer import TransferLink

# SGLang's warmup and health-generate requests name this host: no prefill peer, no transfer
# (0.5.23 disaggregation/utils.py FAKE_BOOTSTRAP_HOST; _is_fake_transfer)
FAKE_BOOTSTRAP_HOST = "2.2.2.2"
KV_PATH = "/ppsweep/kv/{room}"
POLL_REAL_S = 2.0  # the longest one poll is held open (real seconds)
RETRY_REAL_S = 0.05  # the pause before polling again after the bootstrap listener refused


@dataclass(eq=False)
class Room:
    """One bootstrap room: the decode side asked for it (``joined``), its KV landed."""

    born: float = field(default_factory=time.monotonic)
    joined: asyncio.Event = field(default_factory=asyncio.Event)
    landed: asyncio.Event = field(default_factory=asyncio.Event)
    prompt_tokens: int = 0
    transfer_s: float = 0.0
    error: str | None = None


class RoomBoard:
    """The rooms of one prefill server and its link to the decode servers.

    A room lives from the first side that names it until the decode side collected its KV;
    rooms older than ``max_age_real_s`` (both timeouts: neither side waits longer) are dropped,
    so rooms the other side never claimed do not accumulate.
    """

    def __init__(self, max_age_real_s: float) -> None:
        self.rooms: dict[int, Room] = {}
        self.link = TransferLink()
        self.max_age_real_s = max_age_real_s

    def room(self, number: int) -> Room:
        """The room ``number`` (created on first mention)."""
        now = time.monotonic()
        stale = [n for n, r in self.rooms.items() if now - r.born > self.max_age_real_s]
        for n in stale:
            del self.rooms[n]
        return self.rooms.setdefault(number, Room())

    def land(self, number: int, prompt_tokens: int, transfer_s: float) -> None:
        """The room's KV is on the decode side."""
        room = self.room(number)
        room.prompt_tokens = prompt_tokens
        room.transfer_s = transfer_s
        room.landed.set()

    def fail(self, number: int, error: str) -> None:
        """The prefill side gave the room up; a decode poll gets ``error``."""
        room = self.room(number)
        room.error = error
        room.landed.set()


BOARD = web.AppKey("board", RoomBoard)


async def kv_poll(request: web.Request) -> web.Response:
    """``GET /ppsweep/kv/{room}?wait=S``: join the room, then answer when its KV landed
    (``landed``, or ``failed`` with the prefill's error) or after ``S`` (at most POLL_REAL_S)
    real seconds (``waiting``)."""
    board = request.app[BOARD]
    try:
        number = int(request.match_info["room"])
        wait = min(max(float(request.query.get("wait", POLL_REAL_S)), 0.0), POLL_REAL_S)
    except ValueError:
        return web.json_response({"status": "bad request"}, status=400)
    room = board.room(number)
    room.joined.set()
    try:
        await asyncio.wait_for(room.landed.wait(), wait)
    except TimeoutError:
        return web.json_response({"status": "waiting"})
    board.rooms.pop(number, None)
    if room.error is not None:
        return web.json_response({"status": "failed", "error": room.error})
    return web.json_response(
        {"status": "landed", "prompt_tokens": room.prompt_tokens, "transfer_s": room.transfer_s}
    )


async def bootstrap_health(request: web.Request) -> web.Response:
    """``/health`` of SGLang's bootstrap server: 200 ``OK``."""
    return web.Response(text="OK")


def build_bootstrap_app(board: RoomBoard) -> web.Application:
    """The prefill head node's bootstrap listener."""
    app = web.Application()
    app[BOARD] = board
    app.router.add_get("/health", bootstrap_health)
    app.router.add_get(KV_PATH, kv_poll)
    return app


async def receive_kv(
    session: aiohttp.ClientSession, host: str, port: int, room: int, deadline: float
) -> dict[str, Any] | None:
    """Decode side: poll the prefill's bootstrap listener until room ``room``'s KV landed
    (its answer) or failed (the answer, ``status`` ``failed``); None when ``time.monotonic()``
    passed ``deadline`` first. A listener that refuses (not up yet, gone) is polled again."""
    url = f"http://{host}:{port}" + KV_PATH.format(room=room)
    while (left := deadline - time.monotonic()) > 0:
        wait = min(left, POLL_REAL_S)
        try:
            async with session.get(
                url,
                params={"wait": f"{wait:.3f}"},
                timeout=aiohttp.ClientTimeout(total=wait + 5.0),
            ) as resp:
                answer: dict[str, Any] = await resp.json()
        except (aiohttp.ClientError, TimeoutError, ValueError):
            await asyncio.sleep(min(RETRY_REAL_S, max(left, 0.0)))
            continue
        if answer.get("status") in ("landed", "failed"):
            return answer
    return None
