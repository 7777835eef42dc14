"""The emulator's boot-to-boot offset (issue 37 point 4): one normal log offset per boot, σ from
the profile's [scheduler] boot_offset_pct, scales every micro-batch's work."""

from __future__ import annotations

import math
import statistics

import pytest

from pytest_ppsweep.sim.model.placement import Layout
from pytest_ppsweep.sim.model.profile import load_profile
from pytest_ppsweep.sim.model.vbench import make_scheduler, run_round
from pytest_ppsweep.sim.rank.serve import boot_offset


def _tps(offset: float) -> float:
    profile = load_profile("kimi-k3-6000d")
    sched = make_scheduler(profile, Layout(pp=8, tp=4, ep=4, nnodes=4), seed=1,
                           boot_offset=offset)
    return run_round(sched, prompt_tokens=16384, output_tokens=1, concurrency=8,
                     num_requests=16).input_tps


def test_a_boot_offset_slows_every_round_of_the_boot() -> None:
    base, slow = _tps(0.0), _tps(math.log(1.05))
    # the work is 5 % slower; the stage syncs are not scaled, so the round a little less
    assert 0.95 < slow / base < 0.99


def test_each_boot_draws_its_own_offset_with_the_profiles_sigma() -> None:
    assert boot_offset(0.0) == 0.0
    draws = [boot_offset(1.0) for _ in range(4000)]
    assert statistics.fmean(draws) == pytest.approx(0.0, abs=0.001)
    assert statistics.stdev(draws) == pytest.approx(math.log1p(0.01), rel=0.06)
    assert len(set(draws)) == len(draws)  # not the run's seed: every boot its own


@pytest.mark.parametrize("name", ["kimi-k3-6000d", "tiny"])
def test_shipped_profiles_model_no_boot_offset(name: str) -> None:
    # 0: the emulator's runs stay comparable with each other; bench_decisions writes its own
    assert load_profile(name).scheduler.boot_offset_pct == 0.0
