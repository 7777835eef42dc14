"""Streamed outputs written from the scheduler callback: ordering, framing and bookkeeping."""

from __future__ import annotations

import itertools
import json
import socket

from support.sim import ClusterFactory, sse_events

from pytest_ppsweep.sim.model.placement import Layout
from pytest_ppsweep.sim.model.profile import load_profile
from pytest_ppsweep.sim.model.scheduler import SimRequest
from pytest_ppsweep.sim.model.vbench import make_scheduler

KIMI = load_profile("kimi-k3-6000d")


def test_chunked_prompt_emits_each_token_once_and_never_early() -> None:
    # 16K prompts in 8K chunks through 8 stages: a prompt's two chunks are in flight together
    sched = make_scheduler(KIMI, Layout(tp=4, pp=8, ep=4, nnodes=4), chunked_prefill_size=8192)
    emitted: dict[str, list[float]] = {}
    bounds: list[tuple[float, float]] = []  # (next_output_time before the event, output time)
    reqs = []
    for i in range(6):
        req = SimRequest(f"r{i}", 16384, 1 + i % 3, created=0.0)
        req.on_output = lambda r, t: emitted.setdefault(r.rid, []).append(t)
        reqs.append(req)
        sched.submit(req, 0.0)
    while (due := sched.next_event_time()) is not None:
        bound = sched.next_output_time()
        before = sum(len(v) for v in emitted.values())
        sched.advance(due)
        if sum(len(v) for v in emitted.values()) > before:
            assert bound is not None
            bounds.append((bound, due))
    for req in reqs:
        assert len(emitted[req.rid]) == req.max_new_tokens  # nothing after the final token
        assert emitted[req.rid][0] == req.first_token_time
    assert bounds and all(bound <= t for bound, t in bounds)  # the gate's bound is a lower bound


def _raw_post(host: str, port: int, body: dict[str, object], version: str) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST /generate HTTP/{version}\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(head + data)
        chunks = []
        while piece := sock.recv(65536):
            chunks.append(piece)
    return b"".join(chunks)


def _dechunk(body: bytes) -> bytes:
    out = b""
    while True:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out
        out += rest[:size]
        assert rest[size : size + 2] == b"\r\n"
        body = rest[size + 2 :]


def test_stream_framing_http11_and_http10(cluster: ClusterFactory) -> None:
    c = cluster(1, ["--tp-size", "2"])
    c.wait_healthy(30)
    req = {"input_ids": list(range(300)), "sampling_params": {"max_new_tokens": 4}, "stream": True}
    raw = _raw_post(c.hosts[0], c.port, req, "1.1")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    events = sse_events(_dechunk(body))  # written straight from the scheduler callback
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    # the full list so far, growing by one or more tokens a chunk (tokens due at one wake of the
    # driver, at this time scale often all four, share a chunk, as SGLang's drained outputs do)
    counts = [len(ch["output_ids"]) for ch in chunks]
    assert counts[-1] == 4 and all(a < b for a, b in itertools.pairwise(counts))
    for ch in chunks:
        meta = ch["meta_info"]
        assert meta["response_sent_to_client_ts"] >= meta["ppsweep_due_ts"] - 1e-3
        assert ch["text"].count(" ") == len(ch["output_ids"])
    raw10 = _raw_post(c.hosts[0], c.port, req, "1.0")  # no chunked encoding: awaiting path
    head10, _, body10 = raw10.partition(b"\r\n\r\n")
    assert head10.startswith(b"HTTP/1.0 200") and b"chunked" not in head10
    events10 = sse_events(body10)
    assert events10[-1] == "[DONE]" and len(json.loads(events10[-2])["output_ids"]) == 4
