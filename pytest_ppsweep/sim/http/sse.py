"""Server-sent events written straight from the scheduler's due-time callback.

A streamed token must leave the process the moment the emulated engine produces it. Waking
the request handler (``Queue.put_nowait`` -> the handler resumes one event-loop pass later, after
whatever I/O that pass carries) costs a loop iteration; instead the handler installs a *sink*
on its job (:attr:`engine.Job.sink`), and the engine calls it inside the timer callback that
advanced the scheduler: the chunk is encoded and handed to the socket in that same callback.

Framing: the response is prepared with HTTP/1.1 chunked transfer encoding (what aiohttp would
pick anyway for an unsized response) and its headers are on the wire once ``prepare()``
returned, so a chunk is ``<hex length>\\r\\n<payload>\\r\\n`` written with ``transport.write``
(asyncio sends it right away when the socket buffer is empty; TCP_NODELAY is on for every
asyncio TCP socket). aiohttp's ``write_eof()`` later ends the body with ``0\\r\\n\\r\\n``.

The direct path steps aside (the sink returns False and the handler's ordinary, awaiting
``resp.write`` path takes over for the rest of the stream) when the transport is closing (the
handler then sees the error and aborts the request) or when the client stopped reading and
more than :data:`BACKLOG_LIMIT` bytes are buffered (the awaiting path applies back-pressure).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

from aiohttp import web
from aiohttp.http import HttpVersion11

from ..launch.logfmt import SimLog
from ..model.engine import Engine, Job

BACKLOG_LIMIT = 256 * 1024

# Encodes one output (its due time, emulated) into an SSE payload, stamping any "sent" time
# last: the bytes are written immediately after the encoder returns.
Encoder = Callable[[float], bytes]


async def prepare_stream(
    request: web.Request, resp: web.StreamResponse
) -> asyncio.Transport | None:
    """Prepare ``resp``; return the transport when chunks may be written to it directly."""
    direct = request.version >= HttpVersion11
    if direct:
        resp.enable_chunked_encoding()
    await resp.prepare(request)
    transport = request.transport
    if not direct or transport is None or not isinstance(transport, asyncio.Transport):
        return None
    return transport


def frame(payload: bytes) -> bytes:
    """One HTTP/1.1 transfer-encoding chunk."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


class DirectSink:
    """A job's sink: encode and write each output in the scheduler callback that produced it."""

    def __init__(self, transport: asyncio.Transport, encode: Encoder) -> None:
        self.transport = transport
        self.encode = encode
        self.active = True  # False once the handler's awaiting path has taken over

    def __call__(self, due: float) -> bool:
        """Write the output due at ``due`` now; False hands it (and all later ones) back."""
        transport = self.transport
        if transport.is_closing() or transport.get_write_buffer_size() > BACKLOG_LIMIT:
            self.active = False
            return False
        try:
            data = frame(self.encode(due))
        except Exception:  # let the handler's awaiting path meet and report the error
            self.active = False
            return False
        transport.write(data)
        return True


def newest(job: Job, due: float | None) -> float | None:
    """``due`` or the newest output queued behind it: a handler that fell behind writes one
    chunk for all of them, as SGLang's does (the chunk carries every token so far)."""
    while due is not None and not job.outputs.empty():
        due = job.outputs.get_nowait()
    return due


def install(job: Job, sink: DirectSink) -> bool:
    """Attach ``sink`` to ``job`` if no output is waiting in its queue (keeps chunks in order)."""
    if not sink.active or job.sink is not None or not job.outputs.empty() or job.req.finished:
        return False
    job.sink = sink
    return True


@contextlib.contextmanager
def aborting(job: Job, engine: Engine, log: SimLog) -> Iterator[None]:
    """Around a streamed response: any failure aborts the job; a client that went away is
    SGLang's quiet abort (no Traceback in the log), anything else propagates."""
    try:
        yield
    except ConnectionResetError:
        job.sink = None
        engine.abort(job)
        log.line("Client disconnected; the request was aborted.")
    except BaseException:
        job.sink = None
        engine.abort(job)
        raise
