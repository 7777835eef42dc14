"""The SLO search's probe policy (measure/slosearch.py) against a known capacity."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_ppsweep.measure.slosearch import Search, SearchOutcome


def drive(search: Search, within: Callable[[float, int], bool]) -> SearchOutcome:
    """Run the search to its end; ``within(load, nth round)`` is the server's answer."""
    for n in range(200):
        step = search.next()
        if step is None:
            return search.outcome()
        search.record(step[0], within(step[0], n))
    raise AssertionError("the search did not stop")


def test_bisection_brackets_the_capacity_within_the_precision_and_repeats_it() -> None:
    search = Search(1.0, 9.0, precision=0.5, max_probes=8, repeats=3)
    out = drive(search, lambda load, _n: load <= 4.3)
    assert out.low is not None and out.high is not None
    assert out.low <= 4.3 < out.high and out.high - out.low <= 0.5
    assert out.status == "bracketed" and out.confirmed and out.repeats == 3
    assert [p.phase for p in search.probes].count("repeat") == 2
    assert out.probes <= 8
    text = out.text()
    assert text.startswith(f"≥ {out.low:.3g} req/s and < {out.high:.3g} req/s")
    assert "of 8 probes" in text and "3/3 repeats" in text


def test_the_probe_budget_stops_the_search_and_says_so() -> None:
    out = drive(Search(1.0, 100.0, precision=0.01, max_probes=4, repeats=1),
                lambda load, _n: load <= 37.0)
    assert out.probes == 4 and out.status == "budget spent" and not out.precise
    assert "probe budget spent" in out.text()


def test_wide_ranges_bisect_geometrically_and_concurrency_stays_integer() -> None:
    search = Search(1.0, 64.0, precision=1.0, max_probes=10, repeats=1, integer=True, unit="C")
    out = drive(search, lambda load, _n: load <= 11)
    assert [p.load for p in search.probes][:3] == [1.0, 64.0, 8.0]  # √(1·64) = 8
    assert all(p.load == int(p.load) for p in search.probes)
    assert (out.low, out.high) == (11.0, 12.0)
    assert out.text().startswith("≥ 11 C and < 12 C")


def test_nothing_within_at_min_and_everything_within_at_max() -> None:
    below = drive(Search(2.0, 8.0, 0.5, 8), lambda load, _n: False)
    assert below.low is None and below.status == "below min" and below.probes == 1
    assert below.text().startswith("< 2 req/s")
    above = drive(Search(2.0, 8.0, 0.5, 8, repeats=2), lambda load, _n: True)
    assert above.low == 8.0 and above.high is None and above.status == "at least max"
    assert above.confirmed


def test_a_failed_repeat_moves_the_bracket_below_it() -> None:
    # Loads in (4.5, 5.5] pass their first round and fail the second: not sustained.
    seen: dict[float, int] = {}

    def server(load: float, _n: int) -> bool:
        seen[load] = seen.get(load, 0) + 1
        return load <= 4.5 or (load <= 5.5 and seen[load] == 1)

    search = Search(1.0, 9.0, precision=0.5, max_probes=10, repeats=2)
    out = drive(search, server)
    assert any(p.phase == "repeat" and not p.within for p in search.probes)
    assert out.high is not None and out.high <= 5.5
    assert out.low is not None and out.low <= 4.5 and out.confirmed


def test_a_verdict_for_a_load_not_asked_is_refused() -> None:
    search = Search(1.0, 2.0, 0.1, 4)
    with pytest.raises(ValueError, match="not asked"):
        search.record(1.5, True)


def test_both_ends_of_the_bracket_are_confirmed() -> None:
    """Issue 37 point 7: after the low end's repeats, the high end is measured once more; the
    outcome says whether it held (every round at it outside)."""
    search = Search(1.0, 9.0, precision=0.5, max_probes=8, repeats=3)
    out = drive(search, lambda load, _n: load <= 4.3)
    phases = [p.phase for p in search.probes]
    assert phases[-1] == "confirm" and phases.count("confirm") == 1
    assert search.probes[-1].load == out.high
    assert out.high_confirmed and (out.high_outside, out.high_rounds) == (2, 2)
    assert out.text().endswith("3/3 repeats within, upper end 2/2 outside)")
    # a high end that comes back within did not hold: the bracket stands, the outcome says so
    flaky = Search(1.0, 9.0, precision=0.5, max_probes=8, repeats=1)
    seen: dict[float, int] = {}

    def noisy(load: float, _n: int) -> bool:
        seen[load] = seen.get(load, 0) + 1
        return load <= 4.3 or (seen[load] == 2 and load < 4.6)

    out = drive(flaky, noisy)
    assert not out.high_confirmed and (out.high_outside, out.high_rounds) == (1, 2)
    assert "upper end 1/2 outside" in out.text()


def test_an_unproven_first_probe_at_the_minimum_is_measured_again_before_none_within() -> None:
    """The minimum's first probe is the smallest that can prove the SLO: one stalled request of
    its few leaves it unproven, which is no proof that nothing is within. It is measured once
    more (a search probe spent) before the search concludes "none within from the minimum";
    its own verdict is neither an end of the bracket nor a failed repeat. Proven outside, or
    unproven again, the search stops below the minimum as before."""
    search = Search(1.0, 9.0, precision=0.5, max_probes=8, repeats=3)
    for n in range(200):
        step = search.next()
        if step is None:
            break
        load, within = step[0], step[0] <= 4.3
        search.record(load, within and n > 0, unproven=n == 0)
    out = search.outcome()
    assert [p.phase for p in search.probes][:2] == ["unproven", "search"]
    assert [p.load for p in search.probes][:3] == [1.0, 1.0, 9.0]
    assert out.low is not None and out.high is not None and out.low <= 4.3 < out.high
    assert out.confirmed and out.repeats == 3 and out.probes <= 8
    again = Search(2.0, 8.0, 0.5, 8)
    for _ in range(2):
        step = again.next()
        assert step == (2.0, "search")
        again.record(2.0, False, unproven=True)
    assert again.next() is None and again.outcome().status == "below min"
    assert again.outcome().probes == 2
    proven = Search(2.0, 8.0, 0.5, 8)
    proven.record(*(proven.next() or (0.0, ""))[:1], False)
    assert proven.next() is None and proven.outcome().low is None
