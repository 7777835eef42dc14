"""The live status of a layout while it boots, runs a round or is torn down: the protocol the
plugin's progress display fills, the boot's status text and a round's progress bar."""

from __future__ import annotations

import time
from typing import Any, Protocol

from pytest_ppsweep.service.readiness import BootStatus

__all__ = ["BAR_EVERY_S", "BAR_WIDTH", "LiveStatus", "NoStatus", "RoundBar", "boot_status",
           "round_bar"]


class LiveStatus(Protocol):
    """Where a layout's status goes while it boots, runs a round or is torn down (the plugin's
    session.progress.Progress: a line rewritten in place on a terminal, changes in
    progress.log)."""

    def status(self, key: str, text: str, *, state: str | None = None) -> None: ...

    def end(self, key: str) -> None: ...


class NoStatus:
    """No live status (a run driven from a script)."""

    def status(self, key: str, text: str, *, state: str | None = None) -> None:
        pass

    def end(self, key: str) -> None:
        pass


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

    def __init__(self, live: LiveStatus, key: str, phase: str, total: int, scale: float) -> None:
        self.live, self.key, self.phase, self.total, self.scale = live, key, phase, total, scale
        self.count = self.tokens = 0
        self.t0 = self.drawn = time.monotonic()
        self._draw(self.t0)

    def done(self, record: dict[str, Any]) -> None:
        self.count += 1
        if record.get("ok"):
            self.tokens += int(record.get("prompt_tokens") or record.get("prompt_len") or 0)
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
            f"{self.count}/{self.total} | Input TPS {'n/a' if tps is None else f'{tps:,.0f}'} "
            f"| {elapsed:.1f} s",
        )
