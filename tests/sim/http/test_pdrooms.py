"""The bootstrap-room handshake of emulated P/D (sim/http/pdrooms.py), in one event loop over
a real loopback listener."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web

from pytest_ppsweep.sim.http.pdrooms import RoomBoard, build_bootstrap_app, receive_kv

HOST = "127.0.0.1"


Body = Callable[[RoomBoard, aiohttp.ClientSession, int], Awaitable[None]]


async def _with_listener(body: Body) -> None:
    board = RoomBoard(max_age_real_s=60.0)
    runner = web.AppRunner(build_bootstrap_app(board), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, HOST, 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession(trust_env=False) as session:
            await body(board, session, port)
    finally:
        await runner.cleanup()


def test_decode_waits_for_the_room_then_gets_its_kv() -> None:
    async def body(board: RoomBoard, session: aiohttp.ClientSession, port: int) -> None:
        poll = asyncio.ensure_future(receive_kv(session, HOST, port, 7, time.monotonic() + 10))
        room = board.room(7)
        await asyncio.wait_for(room.joined.wait(), 5)  # the handshake: decode asked for it
        assert not poll.done()
        board.land(7, 123, 0.5)
        answer = await asyncio.wait_for(poll, 5)
        assert answer == {"status": "landed", "prompt_tokens": 123, "transfer_s": 0.5}
        assert 7 not in board.rooms  # collected

    asyncio.run(_with_listener(body))


def test_kv_landed_before_the_decode_asked_is_kept_for_it() -> None:
    async def body(board: RoomBoard, session: aiohttp.ClientSession, port: int) -> None:
        board.land(9, 5, 0.0)
        answer = await receive_kv(session, HOST, port, 9, time.monotonic() + 5)
        assert answer is not None and answer["status"] == "landed"

    asyncio.run(_with_listener(body))


def test_waiting_is_bounded_and_a_prefill_failure_is_passed_on() -> None:
    async def body(board: RoomBoard, session: aiohttp.ClientSession, port: int) -> None:
        t0 = time.monotonic()
        assert await receive_kv(session, HOST, port, 1, t0 + 0.3) is None
        assert time.monotonic() - t0 < 2.0
        board.fail(2, "Prefill bootstrap failed")
        answer = await receive_kv(session, HOST, port, 2, time.monotonic() + 5)
        assert answer == {"status": "failed", "error": "Prefill bootstrap failed"}

    asyncio.run(_with_listener(body))


def test_no_listener_is_retried_until_the_deadline() -> None:
    async def body() -> None:
        async with aiohttp.ClientSession(trust_env=False) as session:
            t0 = time.monotonic()
            # port 9 (discard) on loopback: nothing listens, every poll is refused
            assert await receive_kv(session, HOST, 9, 1, t0 + 0.3) is None
            assert time.monotonic() - t0 < 2.0

    asyncio.run(body())


def test_stale_rooms_are_dropped() -> None:
    board = RoomBoard(max_age_real_s=-1.0)  # every room is already too old when looked at
    board.room(1)
    board.room(2)
    assert list(board.rooms) == [2]
