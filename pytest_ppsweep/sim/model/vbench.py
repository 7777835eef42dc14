"""Closed-loop benchmark of the PP scheduler in *virtual* time (no sleeping).

This drives the very same :class:`~pytest_ppsweep.sim.model.scheduler.PPScheduler` the server uses,
with a discrete-event loop instead of the wall clock, the way ``bench_serving`` drives a server:
``concurrency`` clients, each sending its next request as soon as the previous one finished,
``num_requests`` in total. Used by the cost-model tests and for fitting profiles.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .costmodel import CostModel
from .gpumem import plan_memory
from .placement import Layout
from .profile import Profile
from .scheduler import PPScheduler, SimRequest


@dataclass(frozen=True)
class RoundResult:
    """One benchmark round, in emulated seconds."""

    duration_s: float
    input_tps: float
    ttft_s: tuple[float, ...]
    e2e_s: tuple[float, ...]

    @property
    def ttft_p50(self) -> float:
        """Median TTFT."""
        return statistics.median(self.ttft_s)


def make_scheduler(
    profile: Profile,
    layout: Layout,
    *,
    chunked_prefill_size: int | None = None,
    pp_max_micro_batch_size: int | None = None,
    seed: int = 0,
    boot_offset: float = 0.0,
) -> PPScheduler:
    """A scheduler configured the way the server would configure it (``boot_offset``: the
    boot's log offset, rank/serve.boot_offset)."""
    chunk = chunked_prefill_size or profile.memory.chunked_prefill_size_default
    mem = plan_memory(profile, layout, mem_fraction_static=None, chunked_prefill_size=chunk)
    micro = pp_max_micro_batch_size or max(mem.max_running_requests // layout.pp, 1)
    return PPScheduler(
        CostModel(profile, layout),
        chunked_prefill_size=chunk,
        pp_max_micro_batch_size=micro,
        kv_capacity=mem.max_total_num_tokens,
        seed=seed,
        boot_offset=boot_offset,
    )


def run_round(
    sched: PPScheduler,
    *,
    prompt_tokens: int,
    output_tokens: int,
    concurrency: int,
    num_requests: int,
    client_delay_s: float = 0.0,
) -> RoundResult:
    """Run one closed-loop round on ``sched`` starting at its idle state."""
    t0 = 0.0
    now = t0
    sent = 0
    done: list[SimRequest] = []
    pending: list[float] = [t0] * min(concurrency, num_requests)

    def finished(req: SimRequest, t: float) -> None:
        if req.finish_time is not None:
            done.append(req)
            pending.append(t + client_delay_s)

    while len(done) < num_requests:
        pending.sort()
        next_send = pending[0] if pending and sent < num_requests else None
        due = sched.next_event_time()
        if next_send is not None and (due is None or next_send <= due):
            now = pending.pop(0)
            sched.advance(now)
            req = SimRequest(
                f"r{sent}", prompt_tokens, output_tokens, created=now, on_output=finished
            )
            sent += 1
            sched.submit(req, now)
            continue
        if due is None:
            raise RuntimeError("scheduler idle with requests outstanding")
        now = due
        sched.advance(now)
    end = max(r.finish_time or 0.0 for r in done)
    duration = end - t0
    ttft = tuple((r.first_token_time or 0.0) - r.created for r in done)
    e2e = tuple((r.finish_time or 0.0) - r.created for r in done)
    return RoundResult(duration, num_requests * prompt_tokens / duration, ttft, e2e)
