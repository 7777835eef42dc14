"""The live status of a layout while it boots, runs a round or is torn down: the protocol the
plugin's progress display fills, the boot's status text and a round's progress bar."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from pytest_ppsweep.folder.runfolder import LiveRecord
from pytest_ppsweep.service.readiness import BootStatus

__all__ = ["BAR_EVERY_S", "BAR_WIDTH", "LiveStatus", "NoStatus", "Recorded", "RoundBar",
           "boot_status", "round_bar"]


class LiveStatus(Protocol):
    """Where a layout's status goes while it boots, runs a round or is torn down (the plugin's
    session.progress.Progress: a line rewritten in place on a terminal, changes in
    progress.log). ``state``: the text without its clock or bar (a change of it is logged);
    ``phase``: what the layout is doing, for the run folder's live record when ``state`` is
    None (a round's bar: ``benchmark c8 r2/3``)."""

    def status(self, key: str, text: str, *, state: str | None = None,
               phase: str | None = None) -> None: ...

    def end(self, key: str) -> None: ...

    def begin(self, key: str) -> None:
        """A boot or a round of ``key`` starts now (the sweep's ETA counts it)."""

    def took(self, key: str, what: str, seconds: float | None) -> None:
        """A boot (``what`` = ``boot``), a failed boot (``failed``) or a round (``round``) of
        ``key`` took ``seconds`` real seconds."""

    def eta_s(self, key: str) -> float | None:
        """Seconds layout ``key`` will take from now (None: nothing measured to tell)."""


class NoStatus:
    """No live status (a run driven from a script)."""

    def status(self, key: str, text: str, *, state: str | None = None,
               phase: str | None = None) -> None:
        pass

    def end(self, key: str) -> None:
        pass

    def begin(self, key: str) -> None:
        pass

    def took(self, key: str, what: str, seconds: float | None) -> None:
        pass

    def eta_s(self, key: str) -> float | None:
        return None


# The phases after which a layout is finished in its process (its live record entry goes)
LAST_PHASES = ("teardown", "comm")


class Recorded:
    """A LiveStatus that also keeps the run folder's live record (folder.runfolder.LiveRecord:
    ``metadata/live/<pid>.json``) of what each layout of this process is doing, for ``show``
    and ``runs`` while the sweep runs; every call is passed on to ``inner``."""

    def __init__(self, inner: LiveStatus, record: LiveRecord,
                 clock: Callable[[], float] = time.time) -> None:
        self.inner, self.record, self.clock = inner, record, clock
        self._phase: dict[str, str] = {}

    def status(self, key: str, text: str, *, state: str | None = None,
               phase: str | None = None) -> None:
        self.inner.status(key, text, state=state, phase=phase)
        said = state if state is not None else phase
        if said:
            head, _, detail = said.partition(" | ")
            self._phase[key] = head
            self.record.set(key, head, detail, self.clock())

    def end(self, key: str) -> None:
        self.inner.end(key)
        if self._phase.get(key) in LAST_PHASES:
            self._phase.pop(key, None)
            self.record.done(key, self.clock())
        else:
            self.record.pause(key, self.clock())

    def begin(self, key: str) -> None:
        self.inner.begin(key)

    def took(self, key: str, what: str, seconds: float | None) -> None:
        self.inner.took(key, what, seconds)
        if what == "failed":  # a failed boot: the layout runs nothing more
            self._phase.pop(key, None)
            self.record.done(key, self.clock())

    def eta_s(self, key: str) -> float | None:
        return self.inner.eta_s(key)


# A round's bar is redrawn at most this often (the per-request callback stays cheap).
BAR_EVERY_S = 0.2
BAR_WIDTH = 24


def boot_status(status: BootStatus) -> tuple[str, str]:
    """A booting layout's status text and its state (the text without the clock)."""
    mark = f" | {status.milestone}" if status.milestone else ""
    ranks = f"ranks ready {status.ready}/{status.ranks}{mark}"
    clock = f"{status.elapsed_s:.0f} s / {status.timeout_s:.0f} s"
    return f"{status.config_id} booting {clock} | {ranks}", f"booting | {ranks}"


def round_bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[#########...............]`` for ``done`` of ``total``."""
    filled = width * done // total if total else width
    return "[" + "#" * filled + "." * (width - filled) + "]"


class RoundBar:
    """A round's progress bar: requests done of the total and the running Input TPS (emulated
    time on the emulator, as results.csv). Called once per finished request; redrawn at most
    every ``BAR_EVERY_S``, and at the last request."""

    def __init__(self, live: LiveStatus, key: str, phase: str, total: int, scale: float,
                 decode: bool = False) -> None:
        self.live, self.key, self.phase, self.total, self.scale = live, key, phase, total, scale
        # a decode workload's bar counts output tokens (its output TPS), a prefill's its input
        self.decode = decode
        self.count = self.tokens = 0
        self.t0 = self.drawn = time.monotonic()
        self._draw(self.t0)

    def done(self, record: dict[str, Any]) -> None:
        self.count += 1
        if record.get("ok"):
            self.tokens += int(record.get("completion_tokens") or 0) if self.decode else int(
                record.get("prompt_tokens") or record.get("prompt_len") or 0)
        now = time.monotonic()
        if now - self.drawn >= BAR_EVERY_S or self.count >= self.total:
            self._draw(now)

    def _draw(self, now: float) -> None:
        self.drawn = now
        elapsed = now - self.t0
        tps = self.tokens / (elapsed * self.scale) if self.tokens and elapsed > 0 else None
        self.live.status(
            self.key,
            f"{self.key} {self.phase} {round_bar(self.count, self.total)} "
            f"{self.count}/{self.total} | {'output' if self.decode else 'Input'} TPS "
            f"{'n/a' if tps is None else f'{tps:,.0f}'} "
            f"| {elapsed:.1f} s",
            phase=self.phase,
        )
