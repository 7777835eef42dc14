"""Open-loop arrival schedules (bench_serving's --request-rate) and the client's lag."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_ppsweep.measure.arrivals import LAG_FLOOR_S, lag, schedule


def test_inf_sends_everything_at_once() -> None:
    assert schedule(5, math.inf, seed=1) == [0.0] * 5


def test_poisson_gaps_have_the_asked_mean_and_follow_the_time_scale() -> None:
    times = schedule(4001, 2.0, seed=7)
    gaps = np.diff(times)
    assert times[0] == 0.0 and abs(gaps.mean() - 0.5) < 0.03
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.06  # exponential: CV 1
    assert schedule(50, 2.0, seed=7, time_scale=100.0) == pytest.approx(
        [t / 100 for t in schedule(50, 2.0, seed=7)])


def test_burstiness_changes_the_spread_not_the_mean() -> None:
    regular = np.diff(schedule(4001, 4.0, seed=3, burstiness=16.0))
    bursty = np.diff(schedule(4001, 4.0, seed=3, burstiness=0.25))
    assert abs(regular.mean() - 0.25) < 0.01 and abs(bursty.mean() - 0.25) < 0.03
    assert regular.std() / regular.mean() < 0.35 < 1.5 < bursty.std() / bursty.mean()


def _records(due: list[float], late: list[float]) -> list[dict[str, float]]:
    return [{"scheduled_at_raw_s": d, "issued_at_raw_s": d + x} for d, x in zip(due, late,
                                                                                 strict=True)]


def test_a_client_on_time_is_not_behind_and_a_late_one_is() -> None:
    due = [i * 0.1 for i in range(20)]
    on_time = lag(_records(due, [0.001] * 20))
    assert on_time is not None and not on_time.behind
    late = lag(_records(due, [0.01 * i for i in range(20)]))  # drifts 10 ms per request
    assert late is not None and late.behind and late.issued_rate < late.scheduled_rate
    assert "client behind its schedule" in late.text()
    assert late.tolerance_s == pytest.approx(max(LAG_FLOOR_S, 0.05))
    shifted = lag(_records(due, [0.2] * 20))  # a constant delay keeps rate and gaps
    assert shifted is not None and not shifted.behind
    bunched = [0.0] * 19 + [0.3]  # one request held back three gaps: arrivals bunched
    held = lag(_records(due, bunched))
    assert held is not None and held.p99_s - held.p50_s > held.tolerance_s and held.behind


def test_no_schedule_no_lag() -> None:
    assert lag([{"scheduled_at_raw_s": 0.0, "issued_at_raw_s": 0.2}] * 3) is None
    assert lag([{"ok": True}]) is None


def test_each_arrival_stream_is_its_own_schedule_and_stream_0_is_unchanged() -> None:
    """Issue 37 point 7: every SLO probe draws its own stream; stream 0 (closed-loop rounds and
    earlier runs) keeps the schedule it always had; a stream is the same at any rate (common
    random numbers between layouts at the same probe)."""
    base = schedule(40, 2.0, seed=1)
    assert schedule(40, 2.0, seed=1, stream=0) == base
    one, two = schedule(40, 2.0, seed=1, stream=1), schedule(40, 2.0, seed=1, stream=2)
    assert one != base and two != one
    slower = schedule(40, 1.0, seed=1, stream=1)
    assert [round(b / 2, 9) for b in slower] == [round(a, 9) for a in one]
