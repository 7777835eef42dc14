"""A sweep-shaped end-to-end check: real processes, real HTTP, kimi profile at a high time scale."""

from __future__ import annotations

import asyncio
import json
import statistics
import time

import aiohttp
import pytest
from support.sim import ClusterFactory

SCALE = 100.0  # the default; higher scales amplify OS jitter on a busy box
SEEDS_C8 = {2: (5015.95, 25.22), 8: (8809.50, 13.47)}  # seeds §7: Input TPS, TTFT p50


async def bench_round(
    url: str, concurrency: int, requests: int, prompt: int
) -> tuple[float, float]:
    """bench_serving-like round (streaming, TTFT at the first data event), emulated units."""
    body = json.dumps(
        {
            "input_ids": [(i * 31) % 160000 for i in range(prompt)],
            "sampling_params": {"max_new_tokens": 1, "ignore_eos": True},
            "stream": True,
        }
    )
    ttfts: list[float] = []
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session:

        async def one() -> None:
            async with sem:
                start = time.perf_counter()
                async with session.post(url + "/generate", data=body) as resp:
                    first = None
                    async for line in resp.content:
                        if first is None and line.startswith(b"data: {"):
                            first = time.perf_counter()
                    assert first is not None
                    ttfts.append((first - start) * SCALE)

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        duration = (time.perf_counter() - t0) * SCALE
    return requests * prompt / duration, statistics.median(ttfts)


@pytest.mark.slow
def test_sweep_shape_pp2_vs_pp8(cluster: ClusterFactory) -> None:
    results = {}
    for pp in (2, 8):
        tp = 32 // pp
        t0 = time.monotonic()
        c = cluster(
            4,
            [
                "--tp-size",
                str(tp),
                "--pp-size",
                str(pp),
                "--ep-size",
                "4",
                "--chunked-prefill-size",
                "8192",
                "--disable-radix-cache",
                "--mem-fraction-static",
                "0.88",
                "--moe-runner-backend",
                "flashinfer_mxfp4",
            ],
            profile="kimi-k3-6000d",
            scale=str(SCALE),
        )
        c.wait_healthy(30)
        boot = (time.monotonic() - t0) * SCALE
        tps, ttft = asyncio.run(bench_round(c.base_url, 8, 40, 16384))
        results[pp] = (tps, ttft, boot)
        c.stop()
    for pp, (tps, ttft, boot) in results.items():
        seed_tps, seed_ttft = SEEDS_C8[pp]
        # Real-time client/OS overhead is multiplied by the scale, so on a shared 2-core box
        # (load average 10-20 seen) only loose bounds are stable; the +-15 % check against the
        # seeds runs on the same scheduler in virtual time (tests/sim/model/test_costmodel.py).
        assert abs(tps / seed_tps - 1) < 0.5, (pp, tps)
        assert abs(ttft / seed_ttft - 1) < 0.6, (pp, ttft)
        assert 300 < boot < 3000, (pp, boot)  # upper bound: real process start-up on a busy box
    print(results)
    assert results[8][0] > 1.25 * results[2][0]  # PP8 clearly faster than PP2
    assert results[8][1] < results[2][1]
