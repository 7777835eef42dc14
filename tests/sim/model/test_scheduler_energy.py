"""The scheduler counts each PP stage's busy emulated seconds (what its GPUs draw busy power
for, profile [power]): the sum of its micro-batch steps, never more than the time that passed,
and in a pipeline the stages wait on each other (each is busy for only part of the round)."""

from __future__ import annotations

import pytest

from pytest_ppsweep.sim.model.costmodel import CostModel
from pytest_ppsweep.sim.model.placement import Layout
from pytest_ppsweep.sim.model.profile import load_profile
from pytest_ppsweep.sim.model.scheduler import PPScheduler, SimRequest


def _run(pp: int, requests: int) -> tuple[PPScheduler, float]:
    profile = load_profile("tiny")
    sched = PPScheduler(CostModel(profile, Layout(tp=1, pp=pp, ep=1, nnodes=1)),
                        chunked_prefill_size=4096, pp_max_micro_batch_size=8,
                        kv_capacity=10**6)
    reqs = [SimRequest(f"r{i}", 4096, 1, 0.0) for i in range(requests)]
    for r in reqs:
        sched.submit(r, 0.0)
    now = 0.0
    while (due := sched.next_event_time()) is not None:
        now = due
        sched.advance(now)
    assert all(r.finished for r in reqs)
    return sched, now


def test_each_stage_is_busy_for_its_steps_and_no_longer_than_the_round() -> None:
    sched, end = _run(pp=1, requests=3)
    steps = 3 * sched.cost.stage_step_s(0, 4096, True)
    assert sched.stage_busy_s[0] == pytest.approx(steps, rel=0.05)  # within the step jitter
    assert 0 < sched.stage_busy_s[0] <= end + 1e-9


def test_in_a_pipeline_every_stage_waits_part_of_the_round() -> None:
    sched, end = _run(pp=4, requests=2)
    assert len(sched.stage_busy_s) == 4
    assert all(0 < busy < end for busy in sched.stage_busy_s), (sched.stage_busy_s, end)
    # four stages' GPUs idle-wait for most of a two-request round: their busy share is small
    assert sum(sched.stage_busy_s) / (4 * end) < 0.75
