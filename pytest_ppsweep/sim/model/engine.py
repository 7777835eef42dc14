"""Rank 0's serving core: turns HTTP requests into scheduler requests and outputs into tokens.

Output token ids and texts are deterministic functions of the request id (CRC32), so repeated
runs are reproducible without a tokenizer. Text prompts count one token per whitespace-separated
word. Every output carries its *due* time: the emulated instant the scheduler produced it,
which the API reports next to the moment the chunk was really written.

Outputs reach the HTTP handler in one of two ways: queued on ``Job.outputs`` (the handler wakes
one event-loop pass later), or, for streams, through ``Job.sink``: a callable the engine runs
inside the scheduler's due-time callback, which writes the chunk to the socket at once
(sim/http/sse.py). A sink that returns False (or raises) is dropped and the output is queued
instead.

One chunk per request per wake: the scheduler's outputs are collected while the driver advances
it and handed out when that advance is over (:meth:`Engine.flush`), so a request whose tokens
came due together (a wake that came late, on a loaded machine) gets them in one chunk carrying
all of them, not a burst of chunks written microseconds apart. That is SGLang's own behaviour:
its HTTP handler drains every output queued for a request since it last ran and sends the newest
(0.5.23 ``managers/tokenizer_manager.py`` ``_wait_one_response``: "Drain all pending outputs
atomically", ``out = out_list[-1]``), and a client spreads such a chunk's gap over its tokens
(bench_serving's ``sglang`` backend, measure/metrics.py). A burst of one-token chunks instead
measured an ITL p50 of a few ms next to a TPOT p50 of 50 ms (PP4, C=16, time scale 20): the
gaps inside the burst were the emulator's catching up, not the engine's pace. On time, every
wake carries one decode micro-batch's tokens, one per request, so nothing changes there.
"""

from __future__ import annotations

import asyncio
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .driver import RealtimeDriver, TimeBase
from .prometheus import Metrics
from .scheduler import PPScheduler, SimRequest

WORDS = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "at",
    "by",
    "this",
    "had",
    "not",
    "are",
    "but",
    "from",
    "or",
    "have",
    "an",
    "they",
    "which",
    "one",
    "you",
    "were",
    "all",
    "we",
    "her",
    "she",
    "there",
    "would",
    "their",
)


def token_id(rid: str, index: int, vocab: int) -> int:
    """The ``index``-th generated token of request ``rid``."""
    return zlib.crc32(f"{rid}:{index}".encode()) % vocab


def token_text(tid: int) -> str:
    """Detokenized text of a token (never empty, so client TTFT detection works)."""
    return " " + WORDS[tid % len(WORDS)]


def count_text_tokens(text: str) -> int:
    """Deterministic token count of a text prompt: whitespace-separated words."""
    return max(len(text.split()), 1)


@dataclass(eq=False)
class Job:
    """One request in flight on rank 0 together with its output queue."""

    req: SimRequest
    requested_new: int
    received_wall: float
    # due times of outputs for the handler; None: the final chunk was already written by the sink
    outputs: asyncio.Queue[float | None] = field(default_factory=asyncio.Queue)
    sink: Callable[[float], bool] | None = None
    ids: list[int] = field(default_factory=list)
    text: str = ""
    fail_in_stream: bool = False
    stream: bool = True  # False: wake the handler only when the request finished
    log_metrics: bool = True  # counted in /metrics and the completed requests (not the warmup)


class Engine:
    """Owns the scheduler and its real-time driver on rank 0."""

    def __init__(
        self,
        sched: PPScheduler,
        tb: TimeBase,
        *,
        vocab: int,
        metrics: Metrics,
        fail_fraction: float,
        seed: int,
        on_finished: Callable[[int], None] | None = None,
        fail_nth: frozenset[int] = frozenset(),
    ) -> None:
        self.sched = sched
        self.tb = tb
        self.driver = RealtimeDriver(sched, tb, on_advanced=self.flush)
        self.vocab = vocab
        self.metrics = metrics
        self.fail_fraction = fail_fraction
        self.fail_nth = fail_nth  # the requests (1-based, in order received) that fail
        self._drawn = 0
        self._rng = random.Random(seed ^ 0x5EED)
        self._on_finished = on_finished
        self.completed = 0
        self.jobs: set[Job] = set()
        # jobs with outputs not handed out yet, each with its newest output's due time
        self._unsent: dict[Job, float] = {}

    def draw_failure(self) -> str | None:
        """Seeded fault decision for a new request: None, ``"http"`` or ``"stream"``."""
        self._drawn += 1
        if self._drawn in self.fail_nth:
            return "http"
        if self.fail_fraction <= 0 or self._rng.random() >= self.fail_fraction:
            return None
        return "http" if self._rng.random() < 0.5 else "stream"

    def start(
        self,
        rid: str,
        prompt_tokens: int,
        max_new_tokens: int,
        received_wall: float,
        *,
        log_metrics: bool = True,
        stream: bool = True,
        prefilled: bool = False,
    ) -> Job:
        """Create and submit a job (its outputs arrive on ``job.outputs``).

        ``prefilled``: the prompt's KV is already there (a P/D decode server that received it
        from the prefill server): the request joins a micro-batch with no prompt tokens to
        compute, which emits its first token for the cost of the sync only (SGLang's decode
        side adds such requests as a "prebuilt" batch that runs no forward), then decodes."""
        req = SimRequest(rid, prompt_tokens, max(max_new_tokens, 1), created=self.tb.now(),
                         remaining_prefill=0 if prefilled else -1)
        job = Job(req, max_new_tokens, received_wall, stream=stream, log_metrics=log_metrics)

        def on_output(r: SimRequest, t: float) -> None:
            tid = token_id(r.rid, len(job.ids), self.vocab)
            job.ids.append(tid)
            job.text += token_text(tid)
            if log_metrics:
                self.metrics.generation_tokens += 1
                if len(job.ids) == 1:
                    self.metrics.ttft.observe(t - r.created)
            self._unsent[job] = t  # handed out by flush(), once this advance is over

        req.on_output = on_output
        if log_metrics:
            self.metrics.prompt_tokens += prompt_tokens
        self.jobs.add(job)
        self.driver.submit(req)
        return job

    def flush(self) -> None:
        """Hand out what the last advance produced: per request one output (the newest due
        time; the chunk carries every token so far), in the order the requests' outputs came.
        The driver calls this after every advance of the scheduler."""
        unsent, self._unsent = self._unsent, {}
        for job, due in unsent.items():
            self._deliver(job, due)

    def _deliver(self, job: Job, due: float) -> None:
        final = job.req.finish_time is not None
        sink = job.sink
        if final:
            job.sink = None  # the stream ends with this chunk
        written = False
        if sink is not None:  # first: the chunk leaves before any bookkeeping below
            try:
                written = sink(due)
            except Exception:  # the handler's own path will meet (and report) the error
                written = False
            if not written:
                job.sink = None
        if final:
            self._finished(job, job.log_metrics)
        if written:
            if final:
                job.outputs.put_nowait(None)
        elif final or job.stream:
            job.outputs.put_nowait(due)

    def _finished(self, job: Job, log_metrics: bool) -> None:
        self.jobs.discard(job)
        if log_metrics:
            self.metrics.num_requests += 1
            self.metrics.e2e.observe((job.req.finish_time or 0.0) - job.req.created)
            self.completed += 1
            if self._on_finished is not None:
                self._on_finished(self.completed)

    def abort(self, job: Job) -> None:
        """The client went away."""
        if job.req.finished:
            return
        self.jobs.discard(job)
        self.metrics.aborted += 1
        self.driver.abort(job.req)

    def gauges(self) -> dict[str, float]:
        """Scheduler gauges for ``/metrics``."""
        s = self.sched
        return {
            "num_running_reqs": float(s.num_running()),
            "num_queue_reqs": float(len(s.queue)),
            "num_used_tokens": float(s.kv_used),
            "token_usage": s.kv_used / s.kv_capacity if s.kv_capacity else 0.0,
            "gen_throughput": s.last_gen_throughput,
            "is_cuda_graph": 0.0,
        }
