"""Decode streams when the emulator's wakes come late (a loaded machine): TPOT and ITL agree.

The emulator runs in scaled real time: at time scale 20 a PP4 decode token is due every ~1.8 ms
real, less than a loaded 2-core machine's scheduling delay, so the driver often wakes after
several tokens came due. SGLang's HTTP handler, when it runs late, drains the outputs queued for
a request into one chunk (0.5.23 tokenizer_manager ``_wait_one_response``), and the client spreads
that chunk's gap over its tokens. These tests drive the real engine and driver with a clock that
only moves at the wakes of a loaded machine, take every chunk a stream gets at the wake that
wrote it, and measure TPOT and ITL with the client's own rules (measure/metrics.py).
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
from typing import Any

from pytest_ppsweep.measure.metrics import request_itls, request_tpot
from pytest_ppsweep.sim.model.driver import TimeBase
from pytest_ppsweep.sim.model.engine import Engine, Job
from pytest_ppsweep.sim.model.placement import Layout
from pytest_ppsweep.sim.model.profile import load_profile
from pytest_ppsweep.sim.model.prometheus import Metrics
from pytest_ppsweep.sim.model.vbench import make_scheduler

KIMI = load_profile("kimi-k3-6000d")
PP4 = Layout(pp=4, tp=8, ep=4, nnodes=4)
# The wakes of a loaded machine, in emulated seconds: every 4 ms real at time scale 20 (the
# emulator's measured due-to-sent lag on the 2-core machine under load was 3-4 ms real at p50).
WAKE_S = 0.08


class ManualTime(TimeBase):
    """A time base whose emulated "now" is set by the test; every due instant is in the past
    of the real clock, so the driver never spins."""

    def __init__(self) -> None:
        super().__init__(scale=20.0, t0_mono=-1e9, t0_wall=0.0)
        object.__setattr__(self, "t", 0.0)

    def now(self) -> float:
        return float(self.__dict__["t"])

    def set(self, t: float) -> None:
        object.__setattr__(self, "t", t)


class Stream:
    """A client's view of one streamed request: the arrival of each chunk and the tokens the
    server had counted by then (bench.py's record keys)."""

    def __init__(self, job: Job, tb: ManualTime) -> None:
        self.job = job
        self.tb = tb
        self.sent = tb.now()
        self.chunk_s: list[float] = []
        self.chunk_tokens: list[int] = []

    def __call__(self, due: float) -> bool:
        assert due <= self.tb.now()  # never written before it was due
        self.chunk_s.append(self.tb.now() - self.sent)
        self.chunk_tokens.append(len(self.job.ids))
        return True

    def record(self) -> dict[str, Any]:
        return {"ok": True, "chunk_s": self.chunk_s, "chunk_tokens": self.chunk_tokens,
                "completion_tokens": self.chunk_tokens[-1], "ttft_s": self.chunk_s[0],
                "e2e_s": self.chunk_s[-1]}


def closed_loop(concurrency: int, cap: int | None, *, requests: int, output_len: int = 64,
                wake_s: float = WAKE_S) -> list[dict[str, Any]]:
    """``requests`` streamed requests of 1,024 tokens, ``concurrency`` at a time, on PP4, with
    the driver woken only every ``wake_s`` (it handles all that came due by then, as the event
    loop runs timers that are past due back to back). Returns the client's records."""

    async def run() -> list[dict[str, Any]]:
        tb = ManualTime()
        sched = make_scheduler(KIMI, PP4, pp_max_micro_batch_size=cap, seed=1)
        engine = Engine(sched, tb, vocab=KIMI.model.vocab_size, metrics=Metrics("m"),
                        fail_fraction=0.0, seed=1)
        streams: list[Stream] = []

        def send() -> None:
            job = engine.start(f"r{len(streams)}", 1024, output_len, 0.0)
            stream = Stream(job, tb)
            job.sink = stream
            streams.append(stream)

        for _ in range(concurrency):
            send()
        wake = 0.0
        while any(not s.job.req.finished for s in streams):
            wake += wake_s
            tb.set(wake)
            while (due := sched.next_output_time()) is not None and due <= wake:
                engine.driver._fire()  # the loop runs the past-due timer (again)
            for _ in range(sum(s.job.req.finished for s in streams[-concurrency:])):
                if len(streams) < requests and sum(
                        not s.job.req.finished for s in streams) < concurrency:
                    send()  # the client sends its next request when one ended
            assert wake < 600, "the round never ended"
        return [s.record() for s in streams]

    return asyncio.run(run())


def tpot_itl_p50(records: list[dict[str, Any]]) -> tuple[float, float]:
    tpots = [t for t in (request_tpot(r) for r in records) if t is not None]
    itls = [v for r in records for v in request_itls(r)]
    return statistics.median(tpots), statistics.median(itls)


def test_pp4_c16_on_time_one_token_a_chunk() -> None:
    # wakes on time (every 0.5 ms emulated): every chunk adds one token, as before
    records = closed_loop(16, None, requests=32, wake_s=0.0005)
    assert all(b - a == 1 for r in records for a, b in itertools.pairwise(r["chunk_tokens"]))
    tpot, itl = tpot_itl_p50(records)
    assert 0.6 < itl / tpot < 1.5, (tpot, itl)


def test_pp4_c16_itl_agrees_with_tpot_when_wakes_are_late() -> None:
    records = closed_loop(16, None, requests=32)
    tpot, itl = tpot_itl_p50(records)
    # PP4 decodes a token per request every ~36 ms (virtual time); a wake every 80 ms finds 2-3
    # of each stream's tokens due. One chunk of them, its gap spread over them: ITL p50 is a
    # decode step. A chunk per token, written at the same wake, measured ITL p50 0 (tokens in
    # bursts) next to TPOT p50 36 ms.
    assert 0.030 < tpot < 0.045
    assert 0.6 < itl / tpot < 1.5, (tpot, itl)
    # every stream got at most one chunk per wake
    for r in records:
        assert len(set(r["chunk_s"])) == len(r["chunk_s"])


def test_pp4_c1_a_micro_batch_cap_of_one_changes_nothing() -> None:
    # one request is one micro-batch anyway: the cap may not move a token, on time or late
    free = closed_loop(1, None, requests=3)
    capped = closed_loop(1, 1, requests=3)
    assert [r["chunk_s"] for r in capped] == [r["chunk_s"] for r in free]
    assert [r["chunk_tokens"] for r in capped] == [r["chunk_tokens"] for r in free]
    for records in (free, capped):
        tpot, itl = tpot_itl_p50(records)
        assert 0.6 < itl / tpot < 1.5, (tpot, itl)
