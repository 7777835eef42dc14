"""How many requests/s can our client drive? Compared with sglang.bench_serving on the same server.

A zero-delay server takes the server out of the measurement, so the request rate measures the
client. Two such servers (``--server``):

* ``zero`` (default): ``benchkit/zero_server.py`` in its own process (127.0.14.2:36200), an
  aiohttp app whose ``/generate`` reads the body, counts the ids without parsing and at once
  streams one SGLang-shaped chunk plus ``data: [DONE]``. Its per-request work is a few hundred
  microseconds, so on this machine it is not the limit (it has a core of its own when idle).
* ``sim``: the emulator (``python -m pytest_ppsweep.sim``, tiny profile, TP2, 127.0.14.2:36210)
  with ``PPSWEEP_SIM_TIME_SCALE=1e6``: the real drop-in with every emulated wait ~0, but it parses
  each 16K-id body (orjson) and runs its scheduler, so it is closer to being the limit itself.
* ``both``: one after the other.

Workload (both clients, same server, same run, alternating order per round): N streaming
``/generate`` requests of 16,384 ``input_ids``, 1 output token, at most C in flight, all arriving
at t=0 (request rate inf), 1 warmup request, ``/flush_cache`` first. bench_serving runs as
``python -m sglang.bench_serving`` would (``cli_main()`` through
``benchkit/bench_serving_launcher.py``, without the chunk tap: only its request function is
wrapped to keep start time and latency).
Our prompts use vocab_size 4096 (ids < 4096, compact JSON): 77 KB bodies, the size of
bench_serving's (ids < 256 from the tiny tokenizer, ``", "`` separators); the printed body
sizes show it.

Printed per round and client:

* **requests/s** = completed / (last request end - first request send), from per-request
  times, the same definition for both (ours: ``sent_at_raw_s``/``done_at_raw_s``; bench_serving:
  ``start_time`` and ``latency``). bench_serving's own ``request_throughput`` (whose duration also
  holds one ``/server_info`` round trip) is printed next to it.
* **CPU ms/request** = user+system CPU of the client process over the benchmark phase, divided
  by N. Ours: ``getrusage(RUSAGE_SELF)`` around prompt generation, body serialisation and
  ``run_round_sync`` (flush, warmup, N requests) in this process (nothing else runs in it
  meanwhile); the split "build" (prompts + the JSON bodies, done once per prompt set and reused
  by every round of a sweep) + "run" is printed per round. bench_serving serialises each body
  inside its requests (``session.post(json=...)``), so its figure holds that cost.
  bench_serving: ``getrusage(RUSAGE_SELF)`` in its process around its
  ``benchmark()`` (warmup, flush, a 1 s sleep, N requests, two ``/server_info`` calls; it
  excludes its dataset generation). The whole child's CPU (start-up, imports, tokenizer) is
  printed separately.

The summary takes the median over rounds; the goal is ratio ours/bench_serving ≥ 1.0 (exit 1
otherwise). Load averages are printed around every run: on a shared machine the numbers are
lower bounds of the client's capacity.

    python benchmarks/bench_client_capacity.py [--requests 600] [--concurrency 16]
        [--input-len 16384] [--rounds 2] [--server zero|sim|both] [--smoke]

``--smoke``: 1 round per client of 16 requests of 2,048 tokens at C=4 on the zero server.

Needs ``bash scripts/provision_sglang_cpu.sh`` (SGLang venv + tiny tokenizer).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchkit.bench_serving import bench_serving_args, run_bench_serving
from benchkit.processes import port_free, zero_server
from benchkit.provisioned import sglang_python, tiny_tokenizer
from benchkit.results import Result, add_smoke, finish, goal, info
from benchkit.stats import cpu_seconds, loadavg

from pytest_ppsweep.measure import bench
from pytest_ppsweep.measure.workload import WorkloadSpec, generate_prompts
from pytest_ppsweep.sim.rank.localcluster import LocalCluster

HOST = "127.0.14.2"
ZERO_PORT, SIM_PORT, SIM_DIST_PORT = 36200, 36210, 36211
VOCAB = 4096


@dataclass(frozen=True)
class Point:
    """One client run: requests/s and CPU."""

    rps: float
    cpu_ms_per_req: float
    extra: str


@contextlib.contextmanager
def server(kind: str, work: Path) -> Iterator[str]:
    """The zero-delay server of ``kind``; yields its base URL."""
    if kind == "zero":
        with zero_server(HOST, ZERO_PORT, work / "zero.log") as url:
            yield url
        return
    if not port_free(HOST, SIM_PORT):
        raise SystemExit(f"{HOST}:{SIM_PORT} is busy")
    cluster = LocalCluster(
        hosts=[HOST],
        port=SIM_PORT,
        dist_port=SIM_DIST_PORT,
        extra_args=["--model-path", "/models/tiny", "--tp-size", "2", "--disable-radix-cache"],
        env={
            "PPSWEEP_SIM_TIME_SCALE": "1e6",
            "PPSWEEP_SIM_PROFILE": "tiny",
            "PPSWEEP_SIM_STATE_DIR": str(work / "state"),
        },
        log_dir=work / "sim-logs",
    )
    cluster.start()
    try:
        cluster.wait_healthy(120)
        yield cluster.base_url
    finally:
        cluster.stop()


def run_ours(url: str, ns: argparse.Namespace) -> Point:
    """Our client in this process."""
    spec = WorkloadSpec(
        input_len=ns.input_len,
        output_len=1,
        range_ratio=1.0,
        num_requests=ns.requests,
        seed=ns.seed,
        vocab_size=VOCAB,
        request_timeout_s=300,
        round_timeout_s=900,
    )
    c0 = cpu_seconds(resource.getrusage(resource.RUSAGE_SELF))
    prompts = generate_prompts(spec)
    for warmup in (False, True):  # what run_round would build on first use, built here to time it
        prompts.bodies(spec, None, warmup=warmup)
    c1 = cpu_seconds(resource.getrusage(resource.RUSAGE_SELF))
    result = bench.run_round_sync(url, prompts, ns.concurrency, spec=spec)
    c2 = cpu_seconds(resource.getrusage(resource.RUSAGE_SELF))
    cpu = c2 - c0
    if result.completed != ns.requests:
        raise RuntimeError(
            f"ours completed {result.completed}/{ns.requests}: {dict(result.errors)}"
        )
    body = statistics.mean(len(b) for b in prompts.bodies(spec, None))
    return Point(
        result.completed / result.duration_raw_s,
        cpu * 1e3 / ns.requests,
        f"of which build {(c1 - c0) * 1e3 / ns.requests:.3f} + run "
        f"{(c2 - c1) * 1e3 / ns.requests:.3f}; "
        f"duration {result.duration_raw_s:.2f} s, body {body / 1e3:.1f} KB, "
        f"peak in flight {result.peak_concurrency}",
    )


def run_theirs(python: str, url: str, ns: argparse.Namespace, work: Path) -> Point:
    """bench_serving in the SGLang venv."""
    args = bench_serving_args(
        url,
        tokenizer=tiny_tokenizer(),
        num_prompts=ns.requests,
        concurrency=ns.concurrency,
        input_len=ns.input_len,
        output_file=work / "bs.jsonl",
        seed=ns.seed,
    )
    run = run_bench_serving(python, args, work, tap=False)
    ok = [r for r in run.requests if r["success"]]
    if len(ok) != ns.requests:
        raise RuntimeError(f"bench_serving completed {len(ok)}/{ns.requests}")
    first = min(r["start_wall"] for r in ok)
    last = max(r["start_wall"] + r["latency"] for r in ok)
    ids = list(range(256)) * (ns.input_len // 256 + 1)  # its ids cycle through the vocab
    body = len(json.dumps({"input_ids": ids[: ns.input_len]})) + 230  # + sampling params etc.
    return Point(
        len(ok) / (last - first),
        run.bench_cpu_s * 1e3 / ns.requests,
        f"duration {last - first:.2f} s, body ~{body / 1e3:.1f} KB, own "
        f"request_throughput {run.result['request_throughput']:.1f}/s, whole child "
        f"{run.child_cpu_s:.1f} CPU s in {run.child_wall_s:.1f} s",
    )


def main() -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--input-len", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=2, help="runs per client (alternating)")
    ap.add_argument("--server", choices=("zero", "sim", "both"), default="zero")
    ap.add_argument("--seed", type=int, default=1)
    add_smoke(ap, "1 round of 16 requests of 2,048 tokens at C=4")
    ns = ap.parse_args()
    if ns.smoke:
        ns.requests, ns.concurrency, ns.input_len, ns.rounds = 16, 4, 2048, 1
    if ns.requests + 1 > VOCAB:
        raise SystemExit(f"--requests must be < {VOCAB}")
    python = sglang_python()
    kinds = ("zero", "sim") if ns.server == "both" else (ns.server,)
    ok = True
    figures: list[Result] = []
    print(f"start: {loadavg()}", flush=True)
    for kind in kinds:
        points: dict[str, list[Point]] = {"ours": [], "bench_serving": []}
        with (
            tempfile.TemporaryDirectory(prefix="ppsweep-capacity-") as tmp,
            server(kind, Path(tmp)) as url,
        ):
            for rnd in range(1, ns.rounds + 1):
                order = ("ours", "bench_serving") if rnd % 2 else ("bench_serving", "ours")
                for who in order:
                    before = loadavg()
                    t0 = time.perf_counter()
                    if who == "ours":
                        pt = run_ours(url, ns)
                    else:
                        pt = run_theirs(python, url, ns, Path(tmp))
                    points[who].append(pt)
                    print(
                        f"[{kind}] round {rnd} {who:<13}: {pt.rps:8.1f} req/s, "
                        f"{pt.cpu_ms_per_req:6.3f} CPU ms/req ({pt.extra}); wall "
                        f"{time.perf_counter() - t0:.1f} s\n    before {before}\n"
                        f"    after  {loadavg()}",
                        flush=True,
                    )
        ours = statistics.median(p.rps for p in points["ours"])
        theirs = statistics.median(p.rps for p in points["bench_serving"])
        cpu_ours = statistics.median(p.cpu_ms_per_req for p in points["ours"])
        cpu_theirs = statistics.median(p.cpu_ms_per_req for p in points["bench_serving"])
        print(
            f"\n[{kind} server] C={ns.concurrency}, {ns.input_len}-token prompts, "
            f"{ns.requests} requests, median of {ns.rounds} rounds:\n"
            f"  requests/s ours          {ours:8.1f}   CPU ms/request {cpu_ours:6.3f}\n"
            f"  requests/s bench_serving {theirs:8.1f}   CPU ms/request {cpu_theirs:6.3f}\n"
            f"  ratio ours/bench_serving {ours / theirs:8.2f}  (goal ≥ 1.0)\n",
            flush=True,
        )
        ok = ok and ours >= theirs
        figures += [
            goal(f"{kind} server requests/s ours over bench_serving", f"{ours / theirs:.2f} "
                 f"({ours:.1f} over {theirs:.1f})", ">= 1.0", ours >= theirs),
            info(f"{kind} server CPU ms/request ours, bench_serving",
                 f"{cpu_ours:.3f}, {cpu_theirs:.3f}"),
        ]
    print(f"end: {loadavg()}")
    print("PASS" if ok else "FAIL (ours < bench_serving)")
    return finish(figures, ns.smoke)


if __name__ == "__main__":
    sys.exit(main())
