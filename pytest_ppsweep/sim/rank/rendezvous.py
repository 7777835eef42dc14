"""TCP rendezvous between node ranks, standing in for torch.distributed's TCPStore.

Rank 0 listens on ``--dist-init-addr``; every other rank connects (retrying until the
distributed timeout) and sends its rank. The connections stay open for the life of the service
and carry newline-delimited JSON messages:

* rank k -> 0: ``{"type": "join", "rank": k}``, later ``{"type": "ready"}``
* 0 -> all: ``{"type": "go"}`` once every rank joined, ``{"type": "progress", "completed": N,
  "peak_tokens": T, "stage_busy_s": [...]}`` after each request while serving (each PP stage's
  busy emulated seconds: the energy counter of the followers' GPUs), ``{"type": "shutdown"}`` on
  a clean stop.

A dropped connection means the peer process died: like a Gloo collective failing with
``Connection closed by peer``, the survivor logs it and exits non-zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

Message = dict[str, Any]
RETRY_S = 0.02


def encode(msg: Message) -> bytes:
    """One wire message."""
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def split_addr(addr: str) -> tuple[str, int]:
    """``host:port`` -> (host, port)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


class RendezvousServer:
    """Rank 0's side: accepts the other ranks and tracks join/ready."""

    def __init__(self, nnodes: int, on_lost: Callable[[int], None]) -> None:
        self.nnodes = nnodes
        self.writers: dict[int, asyncio.StreamWriter] = {}
        self.ready: set[int] = {0}
        self._on_lost = on_lost
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.closing = False

    async def start(self, host: str, port: int) -> None:
        """Listen on the dist-init address."""
        self._server = await asyncio.start_server(self._handle, host, port, reuse_address=True)

    @property
    def joined(self) -> int:
        """Ranks connected so far, rank 0 included."""
        return 1 + len(self.writers)

    async def wait_for(self, predicate: Callable[[], bool], timeout_real_s: float) -> bool:
        """Wait until ``predicate()`` holds; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_real_s
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True

    def broadcast(self, msg: Message) -> None:
        """Send a message to every connected rank."""
        data = encode(msg)
        for writer in list(self.writers.values()):
            with contextlib.suppress(Exception):
                writer.write(data)

    async def close(self) -> None:
        """Close every connection and the listener."""
        self.closing = True
        for writer in list(self.writers.values()):
            writer.close()
        if self._server is not None:
            self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rank = -1
        try:
            line = await reader.readline()
            msg = json.loads(line) if line else {}
            if msg.get("type") != "join":
                writer.close()
                return
            rank = int(msg["rank"])
            self.writers[rank] = writer
            self._changed.set()
            while True:
                line = await reader.readline()
                if not line:
                    break
                if json.loads(line).get("type") == "ready":
                    self.ready.add(rank)
                    self._changed.set()
        except (ConnectionError, ValueError, OSError):
            pass
        finally:
            if rank >= 0 and not self.closing:
                self.writers.pop(rank, None)
                self._on_lost(rank)


class RendezvousClient:
    """A rank >= 1: connects to rank 0 and relays its messages."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self, host: str, port: int, timeout_real_s: float) -> bool:
        """Connect with retries and send ``join``; False when the timeout passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_real_s
        while loop.time() < deadline:
            try:
                self.reader, self.writer = await asyncio.open_connection(host, port)
            except OSError:
                await asyncio.sleep(RETRY_S)
                continue
            self.send({"type": "join", "rank": self.rank})
            return True
        return False

    def send(self, msg: Message) -> None:
        """Send one message to rank 0."""
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.write(encode(msg))

    async def recv(self) -> Message | None:
        """Next message from rank 0, None when the connection dropped."""
        if self.reader is None:
            return None
        try:
            line = await self.reader.readline()
        except (ConnectionError, OSError):
            return None
        if not line:
            return None
        try:
            msg: Message = json.loads(line)
        except ValueError:
            return None
        return msg

    def close(self) -> None:
        """Close the connection."""
        if self.writer is not None:
            self.writer.close()
