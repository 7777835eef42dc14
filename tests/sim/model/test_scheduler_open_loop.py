"""Open-loop arrivals on the emulator: its queueing is the scheduler's own (nothing special-cased
for a rate), so TTFT rises with the request rate, and past the cost model's capacity the input
throughput saturates where the cost model's steady pipeline puts it."""

from __future__ import annotations

from support.sim import ClusterFactory

from pytest_ppsweep.measure.bench import run_round_sync
from pytest_ppsweep.measure.workload import WorkloadSpec, generate_prompts
from pytest_ppsweep.sim.model.costmodel import CostModel
from pytest_ppsweep.sim.model.placement import Layout
from pytest_ppsweep.sim.model.profile import load_profile

SCALE = 5.0  # a 4K-token request is ~0.12 s emulated, ~23 ms real: the loop's overhead is noise


def test_ttft_rises_with_the_rate_and_throughput_saturates_at_the_cost_model(
        cluster: ClusterFactory) -> None:
    profile = load_profile("tiny")
    chunk = profile.memory.chunked_prefill_size_default  # one prompt = one full micro-batch
    capacity_tps = CostModel(profile, Layout(tp=2, pp=1, ep=1, nnodes=1)).steady_tps(chunk)
    capacity_rps = capacity_tps / chunk
    c = cluster(1, ["--tp-size", "2"], scale=str(SCALE))
    c.wait_healthy(30)
    runs = {}
    for share in (0.3, 0.7, 2.0, 4.0):
        spec = WorkloadSpec(input_len=chunk, output_len=1, range_ratio=1.0, num_requests=30,
                            seed=3, vocab_size=32000, request_rate=share * capacity_rps,
                            request_timeout_s=60, round_timeout_s=120)
        result = run_round_sync(c.base_url, generate_prompts(spec), 30, spec=spec,
                                time_scale=SCALE)
        assert result.completed == 30, result.errors
        runs[share] = result
    ttft = [runs[s].ttft_p50_s for s in sorted(runs)]
    # rising with the rate up to capacity; past it both rounds queue (their order is the
    # queue's luck over 30 requests, not the model's)
    assert ttft[0] < ttft[1] < min(ttft[2:]) and min(ttft[2:]) > 5 * ttft[0], ttft
    # below capacity the server keeps up: throughput is the offered load
    assert runs[0.3].input_tps < 0.5 * capacity_tps
    # above it the queue grows and throughput is the cost model's steady pipeline
    for share in (2.0, 4.0):
        assert abs(runs[share].input_tps / capacity_tps - 1) < 0.15, (
            share, runs[share].input_tps, capacity_tps)
