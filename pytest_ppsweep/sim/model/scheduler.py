"""Event-driven emulation of SGLang's pipeline-parallel scheduler (``event_loop_pp``).

The scheduler is a pure state machine on *emulated* time: it never sleeps and never reads a
clock. A driver (sim/model/driver.py in real time, sim/model/vbench.py in virtual time) asks for
:meth:`PPScheduler.next_event_time`, waits until then and calls :meth:`PPScheduler.advance`.

Model (see sim/model/costmodel.py for what a stage's step costs, ``CostModel.stage_step_s``):

* Requests wait in a FIFO queue. Stage 0 forms micro-batch ``i`` for PP slot ``i % pp`` once it
  is free (it finished micro-batch ``i - 1``) and the slot's previous micro-batch ``i - pp`` has
  left the last stage (SGLang's loop takes the outputs of a slot before it reuses it: at most
  ``pp`` micro-batches are in flight), plus the fixed PP sync (``CostModel.sync_s``: receiving
  the requests and the slot's outputs); a request that arrived by then is in it.
* Every stage works on one micro-batch at a time, in order, and hands it to the next stage when
  done; a micro-batch waits for a busy stage. Stages of different lengths (uneven layer splits,
  the sync on stage 0) therefore give the pipeline's real latency and its bottleneck apart, where
  a lock-step tick charged every stage the slowest one's time (the seeds' PP16 TTFT
  p95 was 27 % high and its C=16 p50 11 % low with it).
* Prefill has priority. A prefill micro-batch takes at most ``chunked_prefill_size`` tokens: first
  the next chunk of the request being chunked, then new requests from the queue. New requests
  are admitted only while ``pp_max_micro_batch_size - running(slot) > 0`` and their prompt plus
  output fits in the free KV tokens; a prompt longer than the remaining budget is chunked.
* Without prefill work the slot's running requests form a decode micro-batch (one token each);
  with nothing for the slot while work is in flight or waits in another slot, stage 0 forms an
  empty micro-batch (its sync only) and moves on to the next slot.
* When a micro-batch leaves the last stage, requests whose last prompt chunk it carried emit
  their first token; decode micro-batches emit one token per request. TTFT therefore emerges
  from queueing, chunking and pipeline depth; nothing computes it in closed form.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .costmodel import CostModel
from .tracerec import TraceRecorder


@dataclass(eq=False)
class SimRequest:
    """A request inside the emulated engine (mutable engine-side state)."""

    rid: str
    prompt_tokens: int
    max_new_tokens: int
    created: float
    remaining_prefill: int = -1
    generated: int = 0
    slot: int = -1
    first_token_time: float | None = None
    finish_time: float | None = None
    aborted: bool = False
    in_flight: bool = False
    kv_reserved: int = 0
    on_output: Callable[[SimRequest, float], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.remaining_prefill < 0:
            self.remaining_prefill = self.prompt_tokens

    @property
    def finished(self) -> bool:
        """True once every requested token was produced (or the request was aborted)."""
        return self.finish_time is not None or self.aborted


@dataclass(frozen=True)
class Piece:
    """A request's share of one micro-batch."""

    req: SimRequest
    tokens: int
    last_chunk: bool


@dataclass(frozen=True)
class MicroBatch:
    """A micro-batch travelling through the pipeline."""

    kind: str  # "prefill" | "decode" | "empty"
    pieces: tuple[Piece, ...]
    slot: int = 0
    factor: float = 1.0  # its jitter (one draw per micro-batch)

    @property
    def tokens(self) -> int:
        """Tokens the micro-batch carries."""
        return sum(p.tokens for p in self.pieces)


LogFn = Callable[[str], None]


class PPScheduler:
    """SGLang-like PP scheduler; see the module docstring."""

    def __init__(
        self,
        cost: CostModel,
        *,
        chunked_prefill_size: int,
        pp_max_micro_batch_size: int,
        kv_capacity: int,
        seed: int = 0,
        log: LogFn | None = None,
        boot_offset: float = 0.0,
    ) -> None:
        self.cost = cost
        # this boot's own log offset (profile [scheduler] boot_offset_pct, drawn at boot)
        self._boot_factor = math.exp(boot_offset)
        self.pp = cost.layout.pp
        self.chunk = chunked_prefill_size
        self.max_micro = pp_max_micro_batch_size
        self.kv_capacity = kv_capacity
        self.kv_used = 0
        self._rng = random.Random(seed)
        self._log = log
        self._jitter = cost.profile.scheduler.jitter_frac
        self.queue: deque[SimRequest] = deque()
        self.running: list[set[SimRequest]] = [set() for _ in range(self.pp)]
        # per stage: the micro-batch it works on, when it ends, and the ones waiting for it
        self.stage_mb: list[MicroBatch | None] = [None] * self.pp
        self._stage_end: list[float] = [0.0] * self.pp
        self._waiting: list[deque[MicroBatch]] = [deque() for _ in range(self.pp)]
        self._slot_busy = [False] * self.pp  # the slot's micro-batch has not left the last stage
        self._chunked: SimRequest | None = None
        self._formed = 0  # micro-batches formed; the next one's slot is _formed % pp
        self._form_at: float | None = None
        self._now = 0.0
        self.peak_tokens = 0
        self.last_gen_throughput = 0.0
        self._tp_window: tuple[float, int] = (0.0, 0)
        self.recorder: TraceRecorder | None = None  # a profile window (/start_profile)
        # emulated seconds each stage has worked on micro-batches (its GPUs draw busy power
        # then: the energy counter the nvidia-smi shim serves, profile [power])
        self.stage_busy_s: list[float] = [0.0] * self.pp

    # ----------------------------------------------------------------- public API
    def submit(self, req: SimRequest, now: float) -> None:
        """Queue a request that arrived at emulated time ``now``."""
        self.queue.append(req)
        self._now = max(self._now, now)
        self._try_form(now)

    def abort(self, req: SimRequest) -> None:
        """Drop a request (client went away); in-flight work finishes silently."""
        req.aborted = True
        if req in self.queue:
            self.queue.remove(req)
        if not req.in_flight:
            self._release(req)
        self._try_form(self._now)

    def busy(self) -> bool:
        """True while any request is queued, running or in flight."""
        return bool(self.queue) or any(self.running) or self._in_flight()

    def num_running(self) -> int:
        """Admitted, unfinished requests."""
        return sum(len(s) for s in self.running)

    def next_event_time(self) -> float | None:
        """Emulated time of the next state change, or None when idle."""
        ends = [self._stage_end[s] for s in range(self.pp) if self.stage_mb[s] is not None]
        if self._form_at is not None:
            ends.append(self._form_at)
        return min(ends) if ends else None

    def next_output_time(self) -> float | None:
        """Emulated time before which no output can be emitted (a lower bound), None when idle:
        an output comes when an emitting micro-batch leaves the last stage, and every emitting
        micro-batch still has its current stage (a waiting one: the busy stage's current work
        first) and every later stage's step to go, at its own jitter; with none in flight, the
        next event (a micro-batch formed then may emit later)."""
        bounds = []
        for s in range(self.pp):
            mb = self.stage_mb[s]
            if self._emits(mb):
                assert mb is not None
                bounds.append(self._stage_end[s] + self._rest(mb, s + 1))
            if mb is not None:
                bounds += [self._stage_end[s] + self._rest(w, s)
                           for w in self._waiting[s] if self._emits(w)]
        return min(bounds) if bounds else self.next_event_time()

    def _rest(self, mb: MicroBatch, first: int) -> float:
        """The steps of stages ``first``.. on ``mb``, at its jitter (no waiting counted)."""
        return sum(self.cost.stage_step_s(s, mb.tokens, mb.kind == "prefill")
                   for s in range(first, self.pp)) * mb.factor

    @staticmethod
    def _emits(mb: MicroBatch | None) -> bool:
        return mb is not None and any(
            not p.req.aborted and (mb.kind == "decode" or p.last_chunk) for p in mb.pieces
        )

    def advance(self, now: float) -> None:
        """Process every event due at or before ``now`` (the last stage first, forming last)."""
        while True:
            due = self.next_event_time()
            if due is None or due > now:
                return
            self._now = max(self._now, due)
            for s in reversed(range(self.pp)):
                if self.stage_mb[s] is not None and self._stage_end[s] <= due:
                    self._stage_done(s, self._stage_end[s])
            if self._form_at is not None and self._form_at <= due:
                self._form(self._form_at)

    # ---------------------------------------------------------------- the pipeline
    def _in_flight(self) -> bool:
        return any(m is not None for m in self.stage_mb) or any(self._waiting)

    def _start(self, s: int, mb: MicroBatch, t: float) -> None:
        self.stage_mb[s] = mb
        step = self.cost.stage_step_s(s, mb.tokens, mb.kind == "prefill")
        sync = self.cost.sync_prefill_s(mb.kind == "prefill") if s == 0 and mb.tokens else 0.0
        self._stage_end[s] = t + sync + (step - sync) * mb.factor  # the sync is not jittered
        if mb.tokens > 0:
            self.stage_busy_s[s] += self._stage_end[s] - t
        if self.recorder is not None and mb.tokens > 0:
            self.recorder.step(s, t, self._stage_end[s], mb.tokens, mb.factor, sync)

    def _stage_done(self, s: int, t: float) -> None:
        mb = self.stage_mb[s]
        assert mb is not None
        self.stage_mb[s] = None
        if s + 1 < self.pp:
            if self.stage_mb[s + 1] is None:
                self._start(s + 1, mb, t)
            else:
                self._waiting[s + 1].append(mb)
        else:
            self._slot_busy[mb.slot] = False
            self._complete(mb, t)
        if self._waiting[s]:
            self._start(s, self._waiting[s].popleft(), t)
        self._try_form(t)

    def _work_left(self) -> bool:
        return (bool(self.queue) or self._chunked is not None or self._in_flight()
                or any(self._ready(k) for k in range(self.pp)))

    def _try_form(self, t: float) -> None:
        """Stage 0 and the next slot free, and something to do: form after the fixed sync."""
        if self.stage_mb[0] is not None or self._form_at is not None:
            return
        if self._slot_busy[self._formed % self.pp] or not self._work_left():
            return  # wait for the slot's outputs, or idle until a submit
        self._form_at = t + self.cost.sync_s()

    def _form(self, t: float) -> None:
        self._form_at = None
        slot = self._formed % self.pp
        mb = self._form_prefill(slot) or self._form_decode(slot)
        if mb is None:
            if not self._work_left():
                return  # idle until a submit
            mb = MicroBatch("empty", (), slot)  # the slot's turn passes (its sync was paid)
        factor = max(0.0, 1.0 + self._rng.gauss(0.0, self._jitter)) * self._boot_factor
        mb = MicroBatch(mb.kind, mb.pieces, slot, factor)
        self._formed += 1
        if mb.kind == "prefill":
            self.peak_tokens = max(self.peak_tokens, mb.tokens)
            self._log_prefill(mb, slot, t)
        self._slot_busy[slot] = True
        self._start(0, mb, t)

    def _ready(self, slot: int) -> bool:
        return any(r.remaining_prefill <= 0 and not r.in_flight and not r.finished
                   for r in self.running[slot])

    def _complete(self, mb: MicroBatch, t: float) -> None:
        for piece in mb.pieces:
            req = piece.req
            if req.aborted:
                req.in_flight = False
                self._release(req)
                continue
            if mb.kind == "prefill" and not piece.last_chunk:
                continue  # a later chunk is still in flight: not decodable yet
            req.in_flight = False
            if req.finished:
                continue  # never emit past the final token
            req.generated += 1
            if req.first_token_time is None:
                req.first_token_time = t
            if req.generated >= req.max_new_tokens:
                req.finish_time = t
                self._release(req)
            self._count_gen(t)
            if req.on_output is not None:
                req.on_output(req, t)

    # -------------------------------------------------------------- batch forming
    def _form_prefill(self, slot: int) -> MicroBatch | None:
        budget = self.chunk
        pieces: list[Piece] = []
        chunked = self._chunked
        if chunked is not None and not chunked.aborted:
            n = min(chunked.remaining_prefill, budget)
            pieces.append(self._take(chunked, n))
            budget -= n
        elif chunked is not None:
            self._chunked = None
        allocatable = self.max_micro - len(self.running[slot])
        while budget > 0 and allocatable > 0 and self.queue and self._chunked is None:
            req = self.queue[0]
            need = req.prompt_tokens + req.max_new_tokens
            if self.kv_used + need > self.kv_capacity:
                break
            self.queue.popleft()
            req.slot = slot
            req.kv_reserved = need
            self.kv_used += need
            self.running[slot].add(req)
            allocatable -= 1
            n = min(req.remaining_prefill, budget)
            pieces.append(self._take(req, n))
            budget -= n
        return MicroBatch("prefill", tuple(pieces)) if pieces else None

    def _take(self, req: SimRequest, n: int) -> Piece:
        req.remaining_prefill -= n
        req.in_flight = True
        last = req.remaining_prefill <= 0
        self._chunked = None if last else req
        return Piece(req, n, last)

    def _form_decode(self, slot: int) -> MicroBatch | None:
        ready = [
            r
            for r in self.running[slot]
            if r.remaining_prefill <= 0 and not r.in_flight and not r.finished
        ]
        if not ready:
            return None
        ready.sort(key=lambda r: r.created)
        for r in ready:
            r.in_flight = True
        return MicroBatch("decode", tuple(Piece(r, 1, True) for r in ready))

    def _release(self, req: SimRequest) -> None:
        if req.slot >= 0:
            self.running[req.slot].discard(req)
        self.kv_used -= req.kv_reserved
        req.kv_reserved = 0
        if self._chunked is req:
            self._chunked = None

    # ------------------------------------------------------------------ logging
    def _count_gen(self, t: float) -> None:
        start, count = self._tp_window
        count += 1
        if t - start >= 1.0:
            self.last_gen_throughput = count / (t - start)
            self._tp_window = (t, 0)
        else:
            self._tp_window = (start, count)

    def _log_prefill(self, mb: MicroBatch, slot: int, t: float) -> None:
        if self._log is None:
            return
        usage = self.kv_used / self.kv_capacity if self.kv_capacity else 0.0
        pending = sum(r.prompt_tokens for r in self.queue)
        self._log(
            f"Prefill batch, #new-seq: {len(mb.pieces)}, #new-token: {mb.tokens}, "
            f"#cached-token: 0, token usage: {usage:.2f}, "
            f"#running-req: {max(len(self.running[slot]) - len(mb.pieces), 0)}, #queue-req: {len(self.queue)}, "  # noqa: E501
            f"#pending-token: {pending}, cuda graph: False"
        )
