"""Mutable run-time state shared by rank 0's HTTP handlers."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from ..launch.config import SimConfig
from ..launch.logfmt import SchedulerLog, SimLog
from ..model.driver import TimeBase
from ..model.engine import Engine
from .pdrooms import RoomBoard


@dataclass(eq=False)
class ServerState:
    """What the handlers need: config, clock, logs, engine and the server status."""

    cfg: SimConfig
    tb: TimeBase
    log: SimLog
    slog: SchedulerLog
    status: str = "Starting"  # Starting -> Up; "Shutdown" while exiting
    engine: Engine | None = None
    startup: dict[str, Any] = field(default_factory=dict)
    pp_micro_override: int | None = None
    created_unix: int = 0
    intake: asyncio.Lock = field(default_factory=asyncio.Lock)
    board: RoomBoard | None = None  # a P/D prefill server's bootstrap rooms (sim/http/pdrooms.py)
    session: aiohttp.ClientSession | None = None  # a P/D decode server's client of them

    def pd_session(self) -> aiohttp.ClientSession:
        """The client a decode server polls prefill bootstrap listeners with (made on first
        use, inside the event loop; closed with the app, sim/http/api_app.py)."""
        if self.session is None:
            self.session = aiohttp.ClientSession(trust_env=False)
        return self.session

    @property
    def pp_micro(self) -> int:
        """Effective pp_max_micro_batch_size (runtime overrides included)."""
        if self.pp_micro_override is not None:
            return self.pp_micro_override
        return self.cfg.pp_max_micro_batch_size
