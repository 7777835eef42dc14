"""measure/probesize.py: the SLO probe's size from the layout's measured prefill time, on the
M/D/1 model of its prefill queue (stats/md1queue.py), and the cases the model does not cover,
said and not guessed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_ppsweep.matrix.slospec import SloLimit, SloSpec
from pytest_ppsweep.measure.probesize import probe_size
from pytest_ppsweep.run.slo_search import (
    probe_requests,
    resized,
    saturation_rate,
    saturation_text,
    service_time,
)
from pytest_ppsweep.stats.md1queue import capacity_utilisation, relaxation_requests, start_bias

S = 16384 / 8800  # the seeds' 16K prompt on PP8: 1.86 s of prefill
SEEDS_SLO = SloSpec(limits=(SloLimit("ttft", 50, 5.0),), search="rate", low=0.05, high=2.0,
                    precision=0.05, auto_requests=True)


def test_the_seeds_slo_sits_near_084_and_asks_198_requests() -> None:
    rho = capacity_utilisation(S, 5.0, 50)
    assert rho == pytest.approx(0.838, abs=0.002)
    assert relaxation_requests(0.838) == pytest.approx(117, abs=1)
    size = probe_size(SEEDS_SLO, S, 40)
    assert size.modelled and size.requests == 198, size
    assert start_bias(198, size.rho or 0, 0.1) <= 0.075 < start_bias(197, size.rho or 0, 0.1)
    assert "1.86 s per request" in size.line() and "utilisation 0.84" in size.line()
    # a looser precision asks fewer requests; a stricter one more
    assert probe_size(replace(SEEDS_SLO, precision_pct=20.0), S, 40).requests < 198
    assert probe_size(replace(SEEDS_SLO, precision_pct=5.0), S, 40).requests > 198


def test_what_the_model_does_not_cover_keeps_the_workloads_size_and_says_why() -> None:
    cases = {
        "a concurrency search is a closed loop": replace(SEEDS_SLO, search="concurrency"),
        "only TTFT percentile limits are modelled": replace(
            SEEDS_SLO, limits=(SloLimit("tpot", 50, 0.1),)),
    }
    # a rate search's probes never go below the 69 that let an overload show; a concurrency
    # search (a closed loop) keeps the workload's size
    for (why, slo), n in zip(cases.items(), (40, 69), strict=True):
        size = probe_size(slo, S, 40)
        assert not size.modelled and size.requests == n and why in size.why, size
    unmeasured = probe_size(SEEDS_SLO, None, 40)
    assert unmeasured.requests == 69 and "no measured Input TPS" in unmeasured.why
    assert probe_size(SEEDS_SLO, None, 40, first=True).requests == 40  # the minimum's probe
    slow = probe_size(SEEDS_SLO, 6.0, 40)  # a request alone takes longer than the limit
    assert slow.requests == 69 and "no load meets the TTFT limits" in slow.why
    # a p99 limit needs ⌈ln 0.05 / ln 0.99⌉ = 299 kept requests: 374 before trimming 10 % a side
    p99 = probe_size(replace(SEEDS_SLO, search="concurrency",
                             limits=(SloLimit("ttft", 99, 30.0),)), S, 40)
    assert p99.requests == 374 and "374 to prove its percentiles" in p99.why


def test_the_service_time_is_the_layouts_own_at_its_highest_c() -> None:
    """Input tokens per completed request over Input TPS, at the highest C, valid rounds only."""
    def row(conc: int, tps: float, completed: int = 40) -> dict[str, str]:
        return {"config_id": "pp8", "concurrency": str(conc), "input_tps": str(tps),
                "input_tokens": str(16384 * completed), "completed": str(completed),
                "input_tokens_nominal": str(16384 * completed), "num_requests": "40",
                "failed": str(40 - completed)}
    rows = [row(8, 7000.0), row(16, 8800.0), row(16, 8700.0), row(16, 8900.0),
            row(16, 100.0, completed=39)]  # a round that missed N/N does not count
    got = service_time(rows, "pp8")
    assert got == pytest.approx(16384 / 8800.0)
    assert service_time(rows, "pp4") is None
    # the search's first probe sends the workload's size and says the others follow from it
    n, said, service = probe_requests(SEEDS_SLO, rows, "pp8", 40)
    assert (n, service) == (40, pytest.approx(16384 / 8800.0))
    assert said == ("pp8: SLO probe size: the first probe (at the minimum load) sends 40 "
                    "requests; the others are sized from what it measures (requests = \"auto\", "
                    "measure/probesize.py)")
    # one prompt at a time (the first probe's TTFT is S): 198, as the bench's server
    assert resized(SEEDS_SLO, 16384 / 8800.0, 16384 / 8800.0, "pp8", 40) == (
        198, f"pp8: {probe_size(SEEDS_SLO, 16384 / 8800.0, 40, 16384 / 8800.0).line()}")
    n, said, service = probe_requests(SEEDS_SLO, rows, "pp4", 40)  # nothing measured
    assert (n, service) == (69, None) and said.startswith(
        "WARNING: pp4: SLO probe size: 69 requests a probe (the workload's num_requests: no "
        "measured Input TPS")
    n, said = resized(SEEDS_SLO, 1.86, None, "pp8", 40)  # the first probe measured no TTFT
    assert n == 69 and said.endswith("the first probe measured no TTFT to size the others on")
    assert probe_requests(replace(SEEDS_SLO, auto_requests=False, requests=300), rows, "pp8",
                          40) == (300, "", None)


def test_a_pipeline_whose_ttft_with_no_queue_is_over_the_limit_meets_it_at_no_load() -> None:
    """The emulated PP8 of the seeds: 1.85 s a request at saturation, but 7.4 s for one request
    alone (a pipeline holds several): no load meets TTFT p50 ≤ 5 s, and the size says so
    instead of claiming a utilisation; a TTFT with no queue of 3 s leaves 2 s to wait."""
    none = probe_size(SEEDS_SLO, 1.85, 40, 7.4)
    assert not none.modelled and none.requests == 69  # the overload floor
    assert "no load meets the TTFT limits, whose TTFT with no queue is already 7.4 s" in none.why
    some = probe_size(SEEDS_SLO, 1.85, 40, 3.0)
    assert some.modelled and "behind a TTFT of 3 s with no queue (the first probe's)" in some.why
    assert capacity_utilisation(1.85, 5.0, 50, 3.0) == pytest.approx(
        capacity_utilisation(1.85, 1.85 + 2.0, 50), abs=1e-9)


def test_a_lenient_limit_near_saturation_still_lets_the_queue_build() -> None:
    """TTFT p50 ≤ 20 s behind a TTFT of 8.1 s with no queue sits at utilisation 0.95, where the
    M/D/1 start-up bias (× (1 − ρ*)) asked for 7 requests: a probe that never builds the queue
    above capacity. The overload floor (measure/overload.min_requests) holds it at 69."""
    lenient = replace(SEEDS_SLO, limits=(SloLimit("ttft", 50, 20.0),))
    size = probe_size(lenient, 1.86, 40, 8.12)
    assert size.modelled and (size.rho or 0) > 0.9 and size.requests == 69, size
    assert "let an overload show" in size.why


def test_the_saturation_rate_is_the_closed_loop_throughput_over_the_input_length() -> None:
    """8,800 tok/s over 16,384 tokens: 0.537 req/s (the highest C's median, valid rounds only);
    none without a closed-loop round, said in a warning."""
    def row(conc: int, tps: float, completed: int = 40) -> dict[str, str]:
        return {"config_id": "pp8", "concurrency": str(conc), "input_tps": str(tps),
                "input_tokens": str(16384 * completed), "completed": str(completed),
                "input_tokens_nominal": str(16384 * completed), "num_requests": "40",
                "failed": str(40 - completed)}
    rows = [row(8, 7000.0), row(16, 8800.0), row(16, 8700.0), row(16, 8900.0),
            row(16, 99999.0, completed=39)]
    assert saturation_rate(rows, "pp8") == pytest.approx(8800 / 16384)
    assert saturation_rate(rows, "pp4") is None
    assert "0.537 req/s" in saturation_text("pp8", 8800 / 16384, "rate")
    assert saturation_text("pp4", None, "rate").startswith("WARNING: pp4: no closed-loop round")
    assert saturation_text("pp4", None, "concurrency") == ""
