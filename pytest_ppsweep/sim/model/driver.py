"""Drive the PP scheduler in scaled real time on the asyncio loop.

Emulated time is ``(monotonic() - t0) * scale``. The driver wakes when an output can be due
(:meth:`PPScheduler.next_output_time`, at its *absolute* emulated time converted back to the loop
clock, so waits never accumulate drift) and advances the scheduler to then, or to now when the
wake came late: the stage hops in between are processed at their own emulated times on that wake
(a submit advances to its own arrival first), so a deep pipeline does not wake the loop once per
stage and micro-batch, and a late wake hands out everything that came due meanwhile at once.
After every advance it calls ``on_advanced`` (the engine hands the outputs to the streams then,
one chunk per request: sim/model/engine.py).
The epoll timeout is rounded up to whole milliseconds, so the timer is set ~1 ms early and the
last fraction of a millisecond is spun away: outputs leave within microseconds of their due time.

asyncio runs a timer only between callbacks, so a handler doing a fraction of a millisecond of
CPU work (parsing a 100 KB body, opening a stream) right before an output is due would delay it.
Such handlers first await :meth:`RealtimeDriver.clear_of_outputs`, which holds them back while
an output is due within :data:`GUARD_S`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from .scheduler import PPScheduler, SimRequest

EARLY_S = 0.0011  # wake this much before the due time (epoll rounds timeouts up to 1 ms)
MAX_SPIN_S = 0.002
GUARD_S = EARLY_S + 0.0005  # clear_of_outputs: keep this much real time free before an output


@dataclass(frozen=True)
class TimeBase:
    """Mapping between emulated seconds and the real clocks."""

    scale: float
    t0_mono: float
    t0_wall: float

    @classmethod
    def start(cls, scale: float, age_s: float = 0.0) -> TimeBase:
        """A time base whose emulated zero is ``age_s`` real seconds ago (the process start)."""
        return cls(scale, time.monotonic() - age_s, time.time() - age_s)

    def now(self) -> float:
        """Current emulated time."""
        return (time.monotonic() - self.t0_mono) * self.scale

    def mono_at(self, emulated: float) -> float:
        """``time.monotonic()`` value of an emulated instant."""
        return self.t0_mono + emulated / self.scale

    def wall_at(self, emulated: float) -> float:
        """``time.time()`` value of an emulated instant."""
        return self.t0_wall + emulated / self.scale

    def real_s(self, emulated_s: float) -> float:
        """Real seconds of an emulated duration."""
        return emulated_s / self.scale

    async def sleep_until(self, emulated: float) -> None:
        """Sleep until the emulated instant (absolute, no drift)."""
        delay = self.mono_at(emulated) - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    async def sleep(self, emulated_s: float) -> None:
        """Sleep an emulated duration."""
        await asyncio.sleep(max(emulated_s, 0.0) / self.scale)


def process_age_s() -> float:
    """Real seconds since this process started (Linux ``/proc``; 0 elsewhere).

    Interpreter start-up and imports take real time that, multiplied by the time scale, would
    inflate the emulated boot; counting emulated time from the process start absorbs it.
    """
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0


class RealtimeDriver:
    """Runs a :class:`PPScheduler` against the loop clock."""

    def __init__(
        self, sched: PPScheduler, tb: TimeBase, on_advanced: Callable[[], None] | None = None
    ) -> None:
        self.sched = sched
        self.tb = tb
        self._on_advanced = on_advanced
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for: float | None = None
        self._waiters: list[asyncio.Future[None]] = []

    async def clear_of_outputs(self, window_s: float = GUARD_S) -> None:
        """Return once no output is due within ``window_s`` real seconds from now.

        Gives up after ``2 * window_s`` (outputs back to back at a high time scale never leave
        a gap): a caller is delayed by a few milliseconds at most.
        """
        give_up = time.monotonic() + 2 * window_s
        while self._handle is not None:  # an armed timer will resolve the waiter
            due = self.sched.next_output_time()
            now = time.monotonic()
            if due is None or self.tb.mono_at(due) - now > window_s or now > give_up:
                return
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            await fut  # resolved right after the next scheduler event was processed

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def submit(self, req: SimRequest) -> None:
        """Hand a request to the scheduler at the current emulated time."""
        now = self.tb.now()
        self._advance(now)  # causality: finish what was due before this arrival
        self.sched.submit(req, now)
        self._arm()

    def _advance(self, until: float) -> None:
        self.sched.advance(until)
        if self._on_advanced is not None:
            self._on_advanced()

    def abort(self, req: SimRequest) -> None:
        """Abort a request (client disconnected)."""
        self.sched.abort(req)
        self._arm()

    def poke(self) -> None:
        """Re-evaluate the schedule (after a parameter change)."""
        self._arm()

    def _arm(self) -> None:
        due = self.sched.next_output_time()
        if due == self._armed_for:
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_for = due
        if due is None:
            return
        loop = asyncio.get_running_loop()
        self._handle = loop.call_at(self.tb.mono_at(due) - EARLY_S, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._armed_for = None
        due = self.sched.next_output_time()
        if due is not None:
            target = self.tb.mono_at(due)
            deadline = time.monotonic() + MAX_SPIN_S
            while time.monotonic() < target and time.monotonic() < deadline:
                pass  # sub-millisecond spin: the timer cannot be more precise than 1 ms
            # every event is processed at its own emulated time (the schedule stays absolute);
            # a late wake also takes what came due since, so it is handed out in one go
            self._advance(max(due, self.tb.now()))
        self._arm()
        self._wake_waiters()
