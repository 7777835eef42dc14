"""measure/probesize.py: the SLO probe's size from the layout's measured prefill time, on the
M/D/1 model of its prefill queue (Erlang's waiting-time distribution checked against a
simulation of the same queue), and the cases the model does not cover, said and not guessed."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from pytest_ppsweep.matrix.slospec import SloLimit, SloSpec
from pytest_ppsweep.measure.probesize import (
    capacity_utilisation,
    md1_wait_cdf,
    probe_size,
    relaxation_requests,
    start_bias,
)
from pytest_ppsweep.run.slo_search import probe_requests, resized, service_time

S = 16384 / 8800  # the seeds' 16K prompt on PP8: 1.86 s of prefill
SEEDS_SLO = SloSpec(limits=(SloLimit("ttft", 50, 5.0),), search="rate", low=0.05, high=2.0,
                    precision=0.05, auto_requests=True)


def _simulated_waits(rho: float, n: int = 200_000) -> list[float]:
    rng, t, free, out = random.Random(7), 0.0, 0.0, []
    for _ in range(n):
        start = max(t, free)
        out.append(start - t)
        free = start + S
        t += rng.expovariate(rho / S)
    return out[20_000:]


@pytest.mark.parametrize("rho", [0.5, 0.8, 0.9])
def test_erlangs_distribution_is_the_simulated_queues(rho: float) -> None:
    waits = _simulated_waits(rho)
    for x in (0.5 * S, 1.7 * S, 4.3 * S):
        simulated = sum(w <= x for w in waits) / len(waits)
        assert md1_wait_cdf(x, rho, S) == pytest.approx(simulated, abs=0.015), (rho, x)
    assert md1_wait_cdf(0.0, rho, S) == pytest.approx(1 - rho)  # no wait: an empty queue
    assert md1_wait_cdf(-1.0, rho, S) == 0.0 and md1_wait_cdf(3 * S, 0.0, S) == 1.0


def test_far_limits_keep_their_digits() -> None:
    """40 service times of wait: the alternating terms reach e^36 and still sum to a share."""
    assert 0.9 < md1_wait_cdf(40 * S, 0.9, S) <= 1.0
    assert md1_wait_cdf(40 * S, 0.9, S) > md1_wait_cdf(20 * S, 0.9, S)


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
    for why, slo in cases.items():
        size = probe_size(slo, S, 40)
        assert not size.modelled and size.requests == 40 and why in size.why, size
    unmeasured = probe_size(SEEDS_SLO, None, 40)
    assert unmeasured.requests == 40 and "no measured Input TPS" in unmeasured.why
    slow = probe_size(SEEDS_SLO, 6.0, 40)  # a request alone takes longer than the limit
    assert slow.requests == 40 and "no load meets the TTFT limits" in slow.why
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
    assert (n, service) == (40, None) and said.startswith(
        "WARNING: pp4: SLO probe size: 40 requests a probe (the workload's num_requests: no "
        "measured Input TPS")
    n, said = resized(SEEDS_SLO, 1.86, None, "pp8", 40)  # the first probe measured no TTFT
    assert n == 40 and said.endswith("the first probe measured no TTFT to size the others on")
    assert probe_requests(replace(SEEDS_SLO, auto_requests=False, requests=300), rows, "pp8",
                          40) == (300, "", None)


def test_a_pipeline_whose_ttft_with_no_queue_is_over_the_limit_meets_it_at_no_load() -> None:
    """The emulated PP8 of the seeds: 1.85 s a request at saturation, but 7.4 s for one request
    alone (a pipeline holds several): no load meets TTFT p50 ≤ 5 s, and the size says so
    instead of claiming a utilisation; a TTFT with no queue of 3 s leaves 2 s to wait."""
    none = probe_size(SEEDS_SLO, 1.85, 40, 7.4)
    assert not none.modelled and none.requests == 40
    assert "no load meets the TTFT limits, whose TTFT with no queue is already 7.4 s" in none.why
    some = probe_size(SEEDS_SLO, 1.85, 40, 3.0)
    assert some.modelled and "behind a TTFT of 3 s with no queue (the first probe's)" in some.why
    assert capacity_utilisation(1.85, 5.0, 50, 3.0) == pytest.approx(
        capacity_utilisation(1.85, 1.85 + 2.0, 50), abs=1e-9)
