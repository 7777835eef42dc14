"""One node rank of the emulated service: process life cycle, signals, rendezvous, peers.

The boot milestones live in sim/rank/bootseq.py, serving in sim/rank/serve.py; sim/rank/main.py
runs them in a :class:`RankProcess`, which imports neither. A rank exits

* 0 after SIGTERM/SIGINT (promptly, < 1 s) or a clean ``shutdown`` broadcast from rank 0;
* 1 when SGLang would crash: an injected fault, a rendezvous timeout, or a peer rank whose
  connection dropped (a Gloo ``Connection closed by peer`` in a real cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import traceback
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web

from ..launch.config import SimConfig
from ..launch.faultlog import SIGQUIT_LINE, peer_lost_error, scheduler_exception
from ..launch.gpustate import GpuStatePublisher, GpuUse, gpu_facts
from ..launch.logfmt import SchedulerLog, SimLog
from ..model.driver import TimeBase, process_age_s
from ..model.gpumem import MemoryPlan
from ..model.placement import local_schedulers
from .rendezvous import RendezvousClient, RendezvousServer

CLEANUP_TIMEOUT_S = 0.4


class RankProcess:
    """State and life cycle of one rank process."""

    def __init__(self, cfg: SimConfig, log: SimLog | None = None) -> None:
        self.cfg = cfg
        self.rank = cfg.args.node_rank
        self.log = log or SimLog()
        self.schedulers = local_schedulers(cfg.layout, self.rank)
        self.slog = SchedulerLog(self.log, cfg.layout, self.schedulers)
        self.tb = TimeBase.start(cfg.settings.time_scale, process_age_s())
        self.faults = cfg.settings.faults
        self.publisher = GpuStatePublisher(
            cfg.settings.state_dir,
            cfg.args.host,
            os.getpid(),
            {"host": cfg.args.host, "profile": cfg.settings.profile,
             "time_scale": cfg.settings.time_scale, **gpu_facts(cfg.profile.gpu)},
        )
        # each PP stage's busy emulated seconds (rank 0's scheduler; followers hear it with
        # each request's progress): this node's GPUs' share, published for the energy counter
        self.stage_busy_s: list[float] = []
        self.server: RendezvousServer | None = None
        self.client: RendezvousClient | None = None
        self.runner: web.AppRunner | None = None
        self.bootstrap_runner: web.AppRunner | None = None  # a P/D prefill's bootstrap listener
        self.go = asyncio.Event()
        self.peak_tokens = 0
        self.stopping = False
        self._done: asyncio.Future[int] | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    # ------------------------------------------------------------------ life cycle
    async def run(self, body: Callable[[RankProcess], Coroutine[Any, Any, None]]) -> int:
        """Run ``body`` (boot and serve, sim/rank/main.py) until finished; returns the exit code."""
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        main = asyncio.create_task(body(self))
        main.add_done_callback(self._main_done)
        code = await self._done
        self.stopping = True
        main.cancel()
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._cleanup(), CLEANUP_TIMEOUT_S)
        self.publisher.release()
        return code

    def finish(self, code: int) -> None:
        """Request the process to exit with ``code`` (first call wins)."""
        if self._done is not None and not self._done.done():
            self._done.set_result(code)

    def spawn(self, coro: Any) -> None:
        """Run a background task that is cancelled at exit."""
        self._tasks.append(asyncio.create_task(coro))

    def fail(self, record: str, *, per_scheduler: bool = True) -> None:
        """Log an SGLang crash record and exit 1 (SIGQUIT to the launcher, like SGLang)."""
        if per_scheduler:
            self.slog.each(record)
        else:
            self.slog.first(record)
        self.exit_failed()

    def exit_failed(self) -> None:
        """Exit 1 after a failure already logged (SIGQUIT to the launcher, like SGLang)."""
        self.log.line("Received sigquit from a child process. It usually means the child failed.")
        self.finish(1)

    def _on_signal(self, sig: int) -> None:
        if sig == signal.SIGTERM and self.rank > 0:
            self.log.line(
                f"SIGTERM received on node_rank {self.rank}; waiting for the rank-0 "
                "ShutdownReq broadcast to stop the schedulers."
            )
        else:
            self.log.line(
                "SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
            )
        self.stopping = True
        if self.server is not None:
            self.server.broadcast({"type": "shutdown"})
        self.finish(0)

    def _main_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            text = "".join(traceback.format_exception(exc)).rstrip()
            self.slog.first("Scheduler hit an exception: " + text)
            self.finish(1)

    async def _cleanup(self) -> None:
        if self.server is not None:
            await self.server.close()
        if self.client is not None:
            self.client.close()
        if self.runner is not None:
            await self.runner.cleanup()
        if self.bootstrap_runner is not None:
            await self.bootstrap_runner.cleanup()

    # ------------------------------------------------------------------ peers
    def on_peer_lost(self, rank: int) -> None:
        """Rank 0: a rank's connection dropped, so its process died."""
        if self.stopping:
            return
        self.slog.first(peer_lost_error(f"node_rank {rank} exited"))
        self.log.line(f"Rank {rank} scheduler is dead. Please check if there are relevant logs.")
        self.log.line(SIGQUIT_LINE)
        self.log.line("Killed")
        self.finish(1)

    async def follow_rank0(self) -> None:
        """Rank >= 1: handle rank 0's messages; exit when the connection drops."""
        assert self.client is not None
        while True:
            msg = await self.client.recv()
            if msg is None:
                if not self.stopping:
                    self.slog.first(peer_lost_error("rank 0 exited"))
                    self.log.line(SIGQUIT_LINE)
                    self.finish(1)
                return
            kind = msg.get("type")
            if kind == "go":
                self.go.set()
            elif kind == "shutdown":
                self.stopping = True
                self.log.line("Received ShutdownReq from rank 0; stopping the schedulers.")
                self.finish(0)
            elif kind == "progress":
                self.stage_busy_s = [float(b) for b in msg.get("stage_busy_s", [])]
                self._on_progress(int(msg.get("completed", 0)), int(msg.get("peak_tokens", 0)))

    def _on_progress(self, completed: int, peak_tokens: int) -> None:
        self.peak_tokens = max(self.peak_tokens, peak_tokens)
        self.publish("ready")  # the memory of a new peak, the busy seconds of this request
        crash = self.faults.get("crash_mid_bench", self.rank)
        target = (
            crash.rank if crash is not None and crash.rank is not None else self.cfg.args.nnodes - 1
        )
        if crash is not None and target == self.rank and completed >= crash.number():
            self.fail(
                scheduler_exception(
                    [],
                    (
                        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
                        "CUDA kernel errors might be asynchronously reported at some other API call, so the "  # noqa: E501
                        "stacktrace below might be incorrect."
                    ),
                ),
                per_scheduler=False,
            )

    # ------------------------------------------------------------------ GPU state
    def publish(self, phase: str, utilization: int = 0) -> None:
        """Publish this node's GPU memory after boot ``phase``."""
        mem: MemoryPlan = self.cfg.mem
        self.publisher.publish(
            [
                GpuUse(s.gpu_index, mem.used_mib(s.pp_rank, phase, self.peak_tokens))
                for s in self.schedulers
            ],
            utilization,
            {s.gpu_index: self.stage_busy_s[s.pp_rank] for s in self.schedulers
             if s.pp_rank < len(self.stage_busy_s)},
        )
