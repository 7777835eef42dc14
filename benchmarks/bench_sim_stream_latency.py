"""Is the emulator ever the bottleneck? Measure when streamed tokens leave vs when they were due.

Starts an emulated 4-node service on loopback (127.0.9.1-4, ports 39900/39901), drives
``--streams`` concurrent streaming ``/generate`` requests of 16,384 ``input_ids`` each, and for
every chunk computes ``response_sent_to_client_ts - ppsweep_due_ts``: the real delay between the
emulated instant the token was produced and the moment the server wrote it. Prints p50/p99/max.

    python benchmarks/bench_sim_stream_latency.py [--streams 64] [--requests 192] [--scale 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pytest_ppsweep.sim.localcluster import LocalCluster


async def drive(url: str, streams: int, requests: int, prompt_len: int) -> list[float]:
    """Run the load; return the gaps (seconds) of every chunk."""
    body = json.dumps(
        {
            "input_ids": [(7 * i) % 163840 for i in range(prompt_len)],
            "sampling_params": {"max_new_tokens": 1, "ignore_eos": True, "temperature": 0.0},
            "stream": True,
        }
    ).encode()
    gaps: list[float] = []
    sem = asyncio.Semaphore(streams)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout, read_bufsize=1 << 20) as session:

        async def one() -> None:
            async with sem, session.post(url + "/generate", data=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        meta = json.loads(line[6:])["meta_info"]
                        gaps.append(meta["response_sent_to_client_ts"] - meta["ppsweep_due_ts"])

        await asyncio.gather(*(one() for _ in range(requests)))
    return gaps


def main() -> int:
    """Entry point."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--streams", type=int, default=64)
    p.add_argument("--requests", type=int, default=192)
    p.add_argument("--prompt-len", type=int, default=16384)
    p.add_argument("--scale", type=float, default=100.0)
    p.add_argument("--pp", type=int, default=8)
    ns = p.parse_args()
    tp = 32 // ns.pp
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(
            hosts=[f"127.0.9.{i}" for i in range(1, 5)], port=39900, dist_port=39901,
            extra_args=["--model-path", "/data/hf_models/Kimi-K3", "--tp-size", str(tp),
                        "--pp-size", str(ns.pp), "--ep-size", str(min(4, tp)),
                        "--chunked-prefill-size", "8192", "--disable-radix-cache"],
            env={"PPSWEEP_SIM_TIME_SCALE": str(ns.scale), "PPSWEEP_SIM_STATE_DIR": tmp},
            log_dir=Path(tmp) / "logs",
        )  # fmt: skip
        cluster.start()
        try:
            cluster.wait_healthy(120)
            t0 = time.perf_counter()
            gaps = asyncio.run(drive(cluster.base_url, ns.streams, ns.requests, ns.prompt_len))
            wall = time.perf_counter() - t0
        finally:
            cluster.stop()
    gaps_ms = sorted(g * 1e3 for g in gaps)
    p99 = gaps_ms[min(int(len(gaps_ms) * 0.99), len(gaps_ms) - 1)]
    print(
        f"chunks={len(gaps_ms)} streams={ns.streams} requests={ns.requests} "
        f"prompt={ns.prompt_len} scale={ns.scale:g} wall={wall:.1f}s"
    )
    print(
        f"due->sent gap: p50={statistics.median(gaps_ms):.3f} ms  p99={p99:.3f} ms  "
        f"max={gaps_ms[-1]:.3f} ms  min={gaps_ms[0]:.3f} ms"
    )
    return 0 if p99 <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
