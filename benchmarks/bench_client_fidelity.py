"""Does our client report the TTFT the server produced? Compared with sglang.bench_serving.

Starts one emulated node (``python -m pytest_ppsweep.sim``, tiny profile, TP2, 127.0.14.1:36100,
``--enable-metrics`` so every chunk's ``meta_info`` carries ``request_received_ts``) and, on that
same server, alternately runs rounds of our load generator (``pytest_ppsweep.measure.bench``, in
this process) and of ``sglang.bench_serving`` (the SGLang venv's python, ``--backend sglang
--dataset-name random-ids --random-input-len 16384 --random-output-len 1 --random-range-ratio 1.0
--max-concurrency 16 --request-rate inf --tokenize-prompt --output-details --warmup-requests 1
--flush-cache``, ignore_eos kept). Both send N streaming requests of 16,384 ``input_ids`` with
at most C = 16 in flight. The emulator stamps its own clock: ``response_sent_to_client_ts`` is
its ``time.time()`` right before the chunk's bytes go to the socket.

Metric (the gate), per completed request, the same for both clients:

    receive lag = (client wall time at which it took the first streamed chunk as its first token)
                  - (the server's ``response_sent_to_client_ts`` in that chunk)

Client and server run on this machine, so both are the same ``time.time()`` clock.

* Ours: the first token is the first ``data:`` event. Its wall time is ``send_ts + ttft_raw_s``
  from the record (``send_ts`` is ``time.time()`` taken right after the ``perf_counter`` that
  starts ``ttft_raw_s``, so they differ by well under a microsecond).
* bench_serving: its TTFT is ``perf_counter()`` at the first chunk with non-empty ``text``,
  after ``orjson.loads`` of that chunk, minus its send time ``st`` (``RequestFuncOutput
  .start_time``). It writes neither ``st`` nor the chunk's ``meta_info``; the launcher
  (``benchkit/bench_serving_launcher.py --tap``) keeps both per request (see its docstring) and
  converts ``st + ttft`` from ``perf_counter`` (CLOCK_MONOTONIC) to wall time.
* To read the chunk's stamp in our client, ``pytest_ppsweep.measure.bench._feed`` is wrapped for
  the run
  (one extra ``orjson.loads`` of each small event, after the first-event time was taken); the
  bench_serving tap does one dict lookup per chunk, after its parse. Both are observation only.
* bench_serving records TTFT 0.0 when no chunk ever had non-empty text (contract §2.4). Such
  requests have no first-token time: they are counted, printed, and excluded from its p99.
  (The emulator's token texts are never empty, so 0 is expected here.)

Printed as well, not gated: **TTFT excess** = client TTFT - server TTFT, where server TTFT =
``response_sent_to_client_ts - request_received_ts`` of the same chunk (the server's clock from
the moment its handler started to the write). The excess adds the client's send path (body
serialisation, connection set-up, waiting for the semaphore is not included: both clients start
the clock after acquiring it) to the receive lag.

Passes (exit 0) when, over all rounds, our receive-lag p99 ≤ 1 ms and ≤ bench_serving's p99.

**Open loop** (``--rate R``, bench_serving's ``--request-rate``; 0 skips it): then one round per
client of the same requests arriving at R req/s (Poisson, real seconds: our time scale is 1
here, as bench_serving knows none) under the same cap C. Figures: each client's *send rate*,
(n − 1) over the span of its actual sends, against the rate its own draw of arrivals asked
(the two clients draw different Poisson gaps, so each is held to its own schedule); ours also
reports its schedule lag (measure/arrivals.py) and both report TTFT p50 at R. Goal: our send
rate within 5 % of our schedule's and the client not behind it. bench_serving sleeps each gap
after the previous send, so its lateness accumulates: its ratio is shown, not gated.
Percentiles are linear-interpolation (``np.percentile``). The machine may be shared: the load
average is printed around every round.

    python benchmarks/bench_client_fidelity.py [--requests 240] [--concurrency 16]
        [--input-len 16384] [--scale 20] [--rounds 2] [--rate 8] [--smoke]

``--smoke``: 1 round per client of 8 requests of 2,048 tokens at C=4, time scale 200, and the
open loop at 20 req/s.

Needs ``bash scripts/provision_sglang_cpu.sh`` (SGLang venv + tiny tokenizer).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchkit.bench_serving import bench_serving_args, run_bench_serving
from benchkit.processes import port_free
from benchkit.provisioned import sglang_python, tiny_tokenizer
from benchkit.results import add_smoke, finish, goal, info
from benchkit.stats import loadavg, percentile

from pytest_ppsweep.measure import bench
from pytest_ppsweep.measure.arrivals import lag as schedule_lag
from pytest_ppsweep.measure.workload import WorkloadSpec, generate_prompts
from pytest_ppsweep.sim.rank.localcluster import LocalCluster

HOST, PORT, DIST_PORT = "127.0.14.1", 36100, 36101
GATE_MS = 1.0


@contextlib.contextmanager
def chunk_tap() -> Iterator[None]:
    """Wrap ``bench._feed`` so each record keeps its first event's server timestamps."""
    orig = bench._feed

    def feed(rec: dict[str, Any], payload: bytes, api: str, engine: Any = None) -> bool:
        if "chunk_sent_ts" not in rec:
            obj = orjson.loads(payload)
            meta = (obj.get("meta_info") or {}) if isinstance(obj, dict) else {}
            rec["chunk_sent_ts"] = meta.get("response_sent_to_client_ts")
            rec["chunk_received_ts"] = meta.get("request_received_ts")
        return orig(rec, payload, api, engine)

    bench._feed = feed
    try:
        yield
    finally:
        bench._feed = orig


def samples(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Receive lag, TTFT excess, client and server TTFT (ms) of rows with a first token."""
    out: dict[str, list[float]] = {"lag": [], "excess": [], "ttft": [], "server_ttft": []}
    for r in rows:
        if r["first_wall"] is None or r["sent"] is None:
            continue
        out["lag"].append((r["first_wall"] - r["sent"]) * 1e3)
        out["ttft"].append(r["ttft"] * 1e3)
        if r["received"] is not None:
            server = (r["sent"] - r["received"]) * 1e3
            out["server_ttft"].append(server)
            out["excess"].append(r["ttft"] * 1e3 - server)
    return out


def run_ours(url: str, spec: WorkloadSpec, concurrency: int) -> list[dict[str, Any]]:
    """One round of our client; normalised rows of completed requests."""
    prompts = generate_prompts(spec)
    with chunk_tap():
        result = bench.run_round_sync(url, prompts, concurrency, spec=spec)
    if result.completed != spec.num_requests:
        raise RuntimeError(
            f"our client completed {result.completed}/{spec.num_requests}: {dict(result.errors)}"
        )
    return [
        {
            "first_wall": r["send_ts"] + r["ttft_raw_s"],
            "ttft": r["ttft_raw_s"],
            "sent": r.get("chunk_sent_ts"),
            "received": r.get("chunk_received_ts"),
        }
        for r in result.records
        if r["ok"]
    ]


def run_theirs(
    python: str, url: str, ns: argparse.Namespace, work: Path
) -> tuple[list[dict[str, Any]], int]:
    """One bench_serving run; (normalised rows of successful requests, TTFT zeros)."""
    args = bench_serving_args(
        url,
        tokenizer=tiny_tokenizer(),
        num_prompts=ns.requests,
        concurrency=ns.concurrency,
        input_len=ns.input_len,
        output_file=work / "bs.jsonl",
    )
    run = run_bench_serving(python, args, work, tap=True)
    ok = [r for r in run.requests if r["success"]]
    if len(ok) != ns.requests:
        raise RuntimeError(f"bench_serving completed {len(ok)}/{ns.requests}")
    zeros = sum(1 for r in ok if not r["ttft"])
    rows = [
        {
            "first_wall": r["first_wall"],
            "ttft": r["ttft"],
            "sent": r.get("chunk_sent_ts"),
            "received": r.get("chunk_received_ts"),
        }
        for r in ok
        if r["ttft"]
    ]
    return rows, zeros


RATE_GOAL = 0.05  # our send rate within 5 % of the rate our arrival schedule asked


def send_rate(starts: list[float]) -> float:
    """(n − 1) over the span of the send times (s): the rate a client actually offered."""
    span = max(starts) - min(starts) if len(starts) > 1 else 0.0
    return (len(starts) - 1) / span if span > 0 else float("inf")


def open_loop_ours(url: str, spec: WorkloadSpec, concurrency: int) -> dict[str, float]:
    """One open-loop round of our client: send rate, the schedule's rate, lag, TTFT p50 (s)."""
    result = bench.run_round_sync(url, generate_prompts(spec), concurrency, spec=spec)
    if result.completed != spec.num_requests:
        raise RuntimeError(f"our client completed {result.completed}/{spec.num_requests} "
                           f"(open loop): {dict(result.errors)}")
    lag = schedule_lag(result.records)
    issued = [float(r["issued_at_raw_s"]) for r in result.records]
    asked = lag.scheduled_rate if lag else float("inf")
    return {"send_rate": send_rate(issued), "asked": asked,
            "lag_p99_ms": lag.p99_s * 1e3 if lag else 0.0,
            "behind": float(bool(lag and lag.behind)), "ttft_p50": result.ttft_p50_s}


def open_loop_theirs(python: str, url: str, ns: argparse.Namespace,
                     work: Path) -> dict[str, float]:
    """One bench_serving run at ``--request-rate``: its send rate, TTFT p50 (s)."""
    args = bench_serving_args(url, tokenizer=tiny_tokenizer(), num_prompts=ns.requests,
                              concurrency=ns.concurrency, input_len=ns.input_len,
                              output_file=work / "bs-open.jsonl", request_rate=ns.rate)
    run = run_bench_serving(python, args, work, tap=True)
    ok = [r for r in run.requests if r["success"]]
    if len(ok) != ns.requests:
        raise RuntimeError(f"bench_serving completed {len(ok)}/{ns.requests} (open loop)")
    return {"send_rate": send_rate([float(r["start_mono"]) for r in run.requests]),
            "ttft_p50": percentile([r["ttft"] for r in ok if r["ttft"]], 50)}


def line(name: str, s: dict[str, list[float]]) -> str:
    """p50/p99/max of the receive lag, p50/p99 of the excess and of both TTFTs."""
    p = percentile
    lag = s["lag"]
    return (
        f"  {name:<14} n={len(lag):<4} receive lag p50={p(lag, 50):7.3f} p99={p(lag, 99):7.3f} "
        f"max={max(lag):7.3f} ms | TTFT excess p50={p(s['excess'], 50):7.3f} "
        f"p99={p(s['excess'], 99):7.3f} ms | client TTFT p50={p(s['ttft'], 50):8.2f} "
        f"server TTFT p50={p(s['server_ttft'], 50):8.2f} ms"
    )


def main() -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=240)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--input-len", type=int, default=16384)
    ap.add_argument("--scale", type=float, default=20.0, help="PPSWEEP_SIM_TIME_SCALE")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per client (alternating)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=8.0,
                    help="open-loop request rate, req/s real (0: closed loop only)")
    add_smoke(ap, "1 round of 8 requests of 2,048 tokens at C=4, time scale 200")
    ns = ap.parse_args()
    if ns.smoke:
        ns.requests, ns.concurrency, ns.input_len, ns.scale, ns.rounds = 8, 4, 2048, 200.0, 1
        ns.rate = 20.0
    python = sglang_python()
    spec = WorkloadSpec(
        input_len=ns.input_len,
        output_len=1,
        range_ratio=1.0,
        num_requests=ns.requests,
        seed=ns.seed,
        vocab_size=4096,
        request_timeout_s=300,
        round_timeout_s=900,
    )
    print(f"start: {loadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ppsweep-fidelity-") as tmp:
        work = Path(tmp)
        cluster = LocalCluster(
            hosts=[HOST],
            port=PORT,
            dist_port=DIST_PORT,
            extra_args=[
                "--model-path",
                "/models/tiny",
                "--tp-size",
                "2",
                "--enable-metrics",
                "--disable-radix-cache",
            ],
            env={
                "PPSWEEP_SIM_TIME_SCALE": str(ns.scale),
                "PPSWEEP_SIM_PROFILE": "tiny",
                "PPSWEEP_SIM_STATE_DIR": str(work / "state"),
            },
            log_dir=work / "logs",
        )
        if not port_free(HOST, PORT):
            raise SystemExit(f"{HOST}:{PORT} is busy")
        cluster.start()
        ours: dict[str, list[float]] = {"lag": [], "excess": [], "ttft": [], "server_ttft": []}
        theirs: dict[str, list[float]] = {k: [] for k in ours}
        zeros = 0
        opened: dict[str, dict[str, float]] = {}
        try:
            cluster.wait_healthy(120)
            for rnd in range(1, ns.rounds + 1):
                order = ("ours", "bench_serving") if rnd % 2 else ("bench_serving", "ours")
                for who in order:
                    before, t0 = loadavg(), time.perf_counter()
                    if who == "ours":
                        got = samples(run_ours(cluster.base_url, spec, ns.concurrency))
                        sink = ours
                    else:
                        rows, z = run_theirs(python, cluster.base_url, ns, work)
                        zeros += z
                        got, sink = samples(rows), theirs
                    for k, v in got.items():
                        sink[k] += v
                    print(
                        f"round {rnd} {who}: wall {time.perf_counter() - t0:.1f} s; "
                        f"before {before}; after {loadavg()}",
                        flush=True,
                    )
                    print(line(who, got), flush=True)
            if ns.rate > 0:
                open_spec = replace(spec, request_rate=ns.rate)
                opened["ours"] = open_loop_ours(cluster.base_url, open_spec, ns.concurrency)
                opened["bench_serving"] = open_loop_theirs(python, cluster.base_url, ns, work)
                print(f"open loop at {ns.rate:g} req/s: {opened}", flush=True)
        finally:
            cluster.stop()
    p99_ours, p99_theirs = percentile(ours["lag"], 99), percentile(theirs["lag"], 99)
    ratio = p99_ours / p99_theirs if p99_theirs > 0 else float("inf")
    print(
        f"\nall rounds: C={ns.concurrency}, {ns.input_len}-token prompts, 1 output token, "
        f"{ns.requests} requests × {ns.rounds} rounds per client, time scale {ns.scale:g}"
    )
    print(line("ours", ours))
    print(line("bench_serving", theirs))
    print(f"  bench_serving TTFT = 0.0 (empty first text, excluded): {zeros}")
    print(
        f"receive-lag p99: ours {p99_ours:.3f} ms, bench_serving {p99_theirs:.3f} ms, "
        f"ratio ours/bench_serving {ratio:.3f}"
    )
    print(f"end: {loadavg()}")
    ok = p99_ours <= GATE_MS and p99_ours <= p99_theirs
    print("PASS" if ok else f"FAIL (need ours ≤ {GATE_MS} ms and ≤ bench_serving's)")
    results = [
        goal("receive-lag p99 ours", f"{p99_ours:.3f} ms (bench_serving {p99_theirs:.3f} ms)",
             f"<= {GATE_MS:g} ms and <= bench_serving's", ok),
        info("receive-lag p99 ratio ours/bench_serving", f"{ratio:.3f}"),
    ]
    if opened:
        o, t = opened["ours"], opened["bench_serving"]
        off = abs(o["send_rate"] / o["asked"] - 1)
        results += [
            goal("open-loop send rate ours", f"{o['send_rate']:.3g} req/s of {o['asked']:.3g} "
                 f"scheduled ({off:.1%} off; lag p99 {o['lag_p99_ms']:.1f} ms)",
                 f"within {RATE_GOAL:.0%} of the schedule, not behind it",
                 off <= RATE_GOAL and not o["behind"]),
            info("open-loop send rate bench_serving", f"{t['send_rate']:.3g} req/s at "
                 f"--request-rate {ns.rate:g} (its own Poisson draw)"),
            info("open-loop TTFT p50 ours vs bench_serving",
                 f"{o['ttft_p50'] * 1e3:.1f} ms vs {t['ttft_p50'] * 1e3:.1f} ms"),
        ]
    return finish(results, ns.smoke)


if __name__ == "__main__":
    sys.exit(main())
