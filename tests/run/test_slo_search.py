"""A resumed SLO search (run/slo_search.py ``replay``): the probes an interrupted run recorded
are fed to the policy, so it asks next exactly what an uninterrupted search would have, and a
finished search asks nothing; a recorded probe the policy would not ask is refused."""

from __future__ import annotations

import pytest

from pytest_ppsweep.matrix.slospec import SloLimit, SloSpec
from pytest_ppsweep.measure.slosearch import Search
from pytest_ppsweep.run.slo_search import plan_text, replay

LIMIT = 1.3  # a layout "within the SLO" up to this rate


def search() -> Search:
    return Search(0.1, 3.0, 0.2, 5, repeats=2)


def rows_of(s: Search) -> list[dict[str, str]]:
    """The slo_probes.csv rows of every probe ``s`` measured (as csv writes them)."""
    return [{"probe": str(k), "phase": p.phase, "load": str(p.load), "within": str(p.within)}
            for k, p in enumerate(s.probes, 1)]


def measure(s: Search, probes: int | None = None) -> None:
    while (step := s.next()) is not None and (probes is None or len(s.probes) < probes):
        s.record(step[0], step[0] <= LIMIT)


def test_a_resumed_search_goes_on_where_the_interrupted_one_stopped() -> None:
    whole = search()
    measure(whole)
    for cut in range(len(whole.probes) + 1):
        interrupted = search()
        measure(interrupted, cut)
        resumed = search()
        recorded = rows_of(interrupted)
        assert replay(resumed, list(reversed(recorded)), "pp8") == cut  # kept in probe order
        measure(resumed)
        assert resumed.probes == whole.probes and resumed.outcome() == whole.outcome()
    done = search()
    assert replay(done, rows_of(whole), "pp8") == len(whole.probes)
    assert done.next() is None  # a finished search measures nothing again


def test_a_recorded_probe_the_search_would_not_ask_is_refused() -> None:
    whole = search()
    measure(whole, 3)
    recorded = rows_of(whole)
    recorded[1]["load"] = "2.5"  # the range changed since ([workload.slo] max)
    with pytest.raises(ValueError, match=r"pp8: slo_probes.csv probe 2 \(search at 2.5\).*"
                                         r"changed since"):
        replay(search(), recorded, "pp8")


def test_the_search_says_what_it_will_spend_before_it_starts() -> None:
    """Issue 37 point 7: the probes, the requests a probe and its arrival time at both ends."""
    slo = SloSpec(limits=(SloLimit("ttft", 50, 5.0),), low=0.05, high=2.0, precision=0.05)
    assert plan_text(slo, 40, 3) == (
        "SLO search plan: at most 8 search probes to bracket the load within 0.05 req/s, then "
        "up to 2 repeat(s) at the low end and 1 at the high end, 40 requests a probe; a probe's "
        "arrivals last 800 s at 0.05 req/s and 20 s at 2 req/s (emulated or real seconds)")
