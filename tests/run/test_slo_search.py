"""A resumed SLO search (run/slo_search.py ``replay``): the probes an interrupted run recorded
are fed to the policy, so it asks next exactly what an uninterrupted search would have, and a
finished search asks nothing; a recorded probe the policy would not ask is refused."""

from __future__ import annotations

import contextlib
import csv
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ppsweep.matrix.slospec import SloLimit, SloSpec
from pytest_ppsweep.measure.slosearch import Search
from pytest_ppsweep.results.slocapacity import CapacitySearch
from pytest_ppsweep.run.slo_search import (
    PROBE_COLUMNS,
    _append,
    outcome_text,
    parse_over,
    plan_text,
    refine_text,
    replay,
)
from pytest_ppsweep.stats.capacity import Share

LIMIT = 1.3  # a layout "within the SLO" up to this rate
N = 200  # requests judged per probe


def search() -> CapacitySearch:
    """The policy as run/slo_search.new_search builds it: the bracket, then refine probes."""
    return CapacitySearch(Search(0.1, 3.0, 0.2, 5, repeats=2), {"ttft_p50_s": 0.5}, 0.95,
                          precision_pct=2.0, max_refine=4)


def over(load: float) -> dict[str, tuple[int, int]]:
    """Requests over the limit: a share that crosses 0.5 at LIMIT, with a deterministic wobble
    (so the fit has a dispersion to measure)."""
    share = 1.0 / (1.0 + math.exp(-(load - LIMIT) / 0.15))
    wobble = 0.05 * math.sin(load * 37.0)
    return {"ttft_p50_s": (round(N * min(max(share + wobble, 0.0), 1.0)), N)}


def rows_of(s: CapacitySearch) -> list[dict[str, str]]:
    """The slo_probes.csv rows of every probe ``s`` measured (as csv writes them)."""
    return [{"probe": str(k), "phase": p.phase, "load": str(p.load), "within": str(p.within),
             "over_limit": ";".join(f"{key}={k}/{n}" for key, (k, n) in over(p.load).items())}
            for k, p in enumerate(s.rounds, 1)]


def measure(s: CapacitySearch, probes: int | None = None) -> None:
    while (step := s.next()) is not None and (probes is None or len(s.rounds) < probes):
        s.record(step[0], step[0] <= LIMIT, over(step[0]))


def test_a_resumed_search_goes_on_where_the_interrupted_one_stopped() -> None:
    whole = search()
    measure(whole)
    for cut in range(len(whole.rounds) + 1):
        interrupted = search()
        measure(interrupted, cut)
        resumed = search()
        recorded = rows_of(interrupted)
        assert replay(resumed, list(reversed(recorded)), "pp8") == cut  # kept in probe order
        measure(resumed)
        assert resumed.rounds == whole.rounds and resumed.capacity() == whole.capacity()
        assert resumed.bracket.outcome() == whole.bracket.outcome()
    assert whole.refines > 0  # the refine probes are replayed too
    done = search()
    assert replay(done, rows_of(whole), "pp8") == len(whole.rounds)
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
        "arrivals last 800 s at 0.05 req/s and 20 s at 2 req/s (emulated or real seconds); "
        "then up to 16 refine probe(s) of 40 requests either side of the estimated capacity "
        "until its 95% interval is within ±10 % (at most 27 probes, 1080 requests in all)")
    no_refine = SloSpec(limits=(SloLimit("ttft", 50, 5.0),), low=0.05, high=2.0,
                        precision=0.05, max_refine=0)
    assert "refine" not in plan_text(no_refine, 40, 3)


def test_the_over_limit_cell_reads_back_and_an_old_row_has_none() -> None:
    """slo_probes.csv's over_limit: per limit, requests over it of those judged; a row written
    before the column existed replays with no share (the fit leaves it out)."""
    assert parse_over("ttft_p50_s=12/160;e2e_p99_s=0/160") == {"ttft_p50_s": (12, 160),
                                                                "e2e_p99_s": (0, 160)}
    assert parse_over(None) == {} and parse_over("") == {}
    old = search()
    rows = [{k: v for k, v in r.items() if k != "over_limit"} for r in rows_of(old)]
    assert rows == [] or "over_limit" not in rows[0]
    whole = search()
    measure(whole, 4)
    legacy = [{k: v for k, v in r.items() if k != "over_limit"} for r in rows_of(whole)]
    resumed = search()
    assert replay(resumed, legacy, "pp8") == 4
    assert all(sh.n == 0 for sh in resumed.shares["ttft_p50_s"])


def test_the_refine_line_says_where_the_capacity_stands_and_what_precision_needs() -> None:
    """docs/WALKTHROUGH.md §5: seven probes of 160 judged requests; ±12 % → ±10 % needs about
    7 × ((12/10)² − 1) = 3 more probes (the width shrinks as the root of the probes)."""
    s = search()
    assert refine_text(s, 200).startswith("SLO refine: the probes do not place the capacity yet")
    s = CapacitySearch(Search(0.05, 2.0, 0.05, 8, repeats=3), {"ttft_p50_s": 0.5}, 0.95, 10.0,
                       16)
    s.shares["ttft_p50_s"] = [Share(0.36, 32, 160), Share(0.40, 72, 160), Share(0.42, 48, 160),
                              Share(0.44, 61, 160), Share(0.46, 99, 160), Share(0.49, 128, 160),
                              Share(0.40, 40, 160)]
    assert refine_text(s, 200) == (
        "SLO refine: capacity 0.439 req/s (95% interval 0.413-0.49 req/s, ±12 %, from 7 probes); "
        "dispersion 8.4 (a probe's requests count as 1/8.4 independent ones); ±10 % needs about "
        "3 more probe(s) of 200 requests (at most 16)")


def test_a_probe_row_appended_to_an_older_file_keeps_that_files_columns(
        tmp_path: Path) -> None:
    """A resumed run whose slo_probes.csv an earlier version began (no over_limit column): the
    new rows keep that file's columns, so every row still reads under its header."""

    class Store:
        dir = tmp_path

        @contextlib.contextmanager
        def locked(self) -> Iterator[None]:
            yield

    old = [c for c in PROBE_COLUMNS if c != "over_limit"]
    (tmp_path / "slo_probes.csv").write_text(",".join(old) + "\n" + ",".join(
        "1" if c == "probe" else "" for c in old) + "\n", encoding="utf-8")
    _append(Store(), {"probe": 2, "load": 0.5, "over_limit": "ttft_p50_s=3/8"})  # type: ignore[arg-type]
    with (tmp_path / "slo_probes.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["probe"] for r in rows] == ["1", "2"] and rows[1]["load"] == "0.5"
    assert all(None not in r for r in rows)  # no value without a column
    fresh = tmp_path / "new"
    fresh.mkdir()
    Store.dir = fresh
    _append(Store(), {"probe": 1, "over_limit": "ttft_p50_s=3/8"})  # type: ignore[arg-type]
    with (fresh / "slo_probes.csv").open(newline="", encoding="utf-8") as fh:
        assert next(csv.DictReader(fh))["over_limit"] == "ttft_p50_s=3/8"


def test_the_outcome_says_the_capacity_or_why_there_is_none() -> None:
    whole = search()
    measure(whole)
    cap = whole.capacity()
    assert cap is not None
    text = outcome_text(whole.bracket.outcome(), cap, whole.refines)
    assert text.startswith(whole.bracket.outcome().text() + "; capacity ")
    assert f"95% interval {cap.low:.3g}-{cap.high:.3g} req/s" in text
    assert text.endswith(f", {whole.refines} refine probe(s)")
    below = Search(0.1, 3.0, 0.2, 5)
    below.next()
    below.record(0.1, False)
    assert outcome_text(below.outcome(), None, 0).endswith(
        "; no capacity estimate (nothing within the SLO from the minimum)")
    crossed = Search(0.1, 3.0, 0.2, 5)
    crossed.next()
    crossed.record(0.1, True)
    crossed.next()
    crossed.record(3.0, False)
    assert "the probes outside it broke another rule" in outcome_text(
        crossed.outcome(), None, 0, crossed=False)
    assert "too few probes near the crossing" in outcome_text(crossed.outcome(), None, 0)
