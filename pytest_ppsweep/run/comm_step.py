"""The all-reduce benchmark of a layout's TP domains (seeds §9.2), run with its service
stopped: torn down first if it is up, never booted otherwise."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pytest_ppsweep.matrix.commspec import size_label
from pytest_ppsweep.matrix.model import Config
from pytest_ppsweep.run.context import RunContext
from pytest_ppsweep.run.lifecycle import Lifecycle

if TYPE_CHECKING:
    from pytest_ppsweep.comm.runner import DomainRun

__all__ = ["CommStep"]


class CommStep:
    """The all-reduce benchmark of the layouts of one run."""
    def __init__(self, ctx: RunContext, lifecycle: Lifecycle) -> None:
        self.ctx = ctx
        self.lifecycle = lifecycle

    def comm(self, config: Config) -> list[DomainRun]:
        """The all-reduce benchmark on each TP domain of ``config`` (seeds §9.2), with its
        service stopped: torn down first if it is up (after the layout's benchmark), never
        booted otherwise. Results are in comm.csv / comm_summary.csv as each domain ends;
        :class:`~pytest_ppsweep.comm.runner.CommFailed` names node and rank."""
        from pytest_ppsweep.comm.runner import run_comm  # only when the benchmark runs

        sid = config.id
        if sid in self.lifecycle.up:
            self.ctx.progress(f"{sid}: service stopped for the all-reduce benchmark")
            self.lifecycle.teardown(self.lifecycle.up[sid])
        cluster = self.lifecycle.cluster_for(config)
        started = time.monotonic()
        self.ctx.progress(f"{sid}: all-reduce benchmark on {cluster.name}")
        try:
            runs, notes = run_comm(
                self.ctx.sweep, cluster, config, self.ctx.store, self.ctx.registry,
                status=lambda text: self.ctx.live.status(sid, f"{sid} comm {text}", state="comm"),
            )
        finally:
            self.ctx.live.end(sid)
            self.lifecycle.held(sid, started)
        for note in notes:
            self.ctx.progress(f"{sid}: {note}")
        for run in runs:
            by = {int(r["size_bytes"]): r for r in run.rows}
            big = by.get(max(by)) if by else None
            if big is not None:
                self.ctx.progress(
                    f"{sid}: all-reduce {run.domain.name} ({run.domain.label}): "
                    f"{len(run.rows)} sizes, {size_label(int(big['size_bytes']))} in "
                    f"{float(big['time_us']) / 1000:.3f} ms, busbw {float(big['busbw_gbs']):.2f} "
                    f"GB/s ({time.monotonic() - started:.1f} s real)"
                )
        return runs
