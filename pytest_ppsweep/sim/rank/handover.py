"""What the boot sequence hands to the serving phase: the emulated phase clock and warmup facts.

:class:`Phases` waits consecutive boot phases at absolute emulated instants; sim/rank/bootseq.py
runs the start-up phases with it and sim/rank/serve.py continues it through the warmup. Both
import this module, neither imports the other.
"""

from __future__ import annotations

import os

from ..launch.faults import DEFAULT_HANG_S
from .node import RankProcess


class Phases:
    """Absolute emulated schedule of consecutive phases (no drift from summed sleeps)."""

    def __init__(self, rp: RankProcess) -> None:
        self.rp = rp
        self.cursor = rp.tb.now()

    def restart(self) -> None:
        """Continue from now (after a wait of unknown length)."""
        self.cursor = self.rp.tb.now()

    async def wait(self, emulated_s: float) -> None:
        """Let ``emulated_s`` pass after the previous phase ended."""
        self.cursor += emulated_s
        await self.rp.tb.sleep_until(self.cursor)


def hang_seconds(rp: RankProcess) -> float | None:
    """Length of an injected warmup hang, or None."""
    fault = rp.faults.get("watchdog_hang")
    return None if fault is None else fault.number(DEFAULT_HANG_S)


def pid() -> int:
    """This process id (uvicorn's ``Started server process`` line)."""
    return os.getpid()
