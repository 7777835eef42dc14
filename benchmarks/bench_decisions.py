"""Does the seeds' sweep decide honestly on a busy machine? (issue 25: adaptive repeats, answers)

Runs ``pytest test_matrix`` on the shipped seeds' sweep (test_matrix/ppsweep.toml, the emulator
on 4 loopback nodes, here on 127.0.63.1-4 so as not to meet another sweep's ports) while one
process keeps a core busy (``python3 -c 'while True: pass'``, bounded by the run), then reads
the run's answers.json. Goals: exit status 0; the layout answer is PP8 decided, or inconclusive
with a rerun command; it never names a layout the data shows slower than PP8. Adaptive repeats
(extra rounds while the layout is up) must get there, not a looser threshold: the threshold is
the file's (2 %).

    python benchmarks/bench_decisions.py [--runs 1] [--no-busy] [--smoke]

``--smoke``: the same code path on PP4 and PP8 only, the file's 40 requests a round, time scale 200.

**The second level** (issue 37 point 4, rounds within boots). The emulator's profile models no
boot-to-boot spread (``[scheduler] boot_offset_pct = 0``: the seeds measured one boot per layout).
This benchmark writes its own copy of the profile with ``boot_offset_pct`` =
``BOOT_OFFSET_PCT`` (1 %, an assumption stated in that copy: of the order of the seeds' round
spread), so each of its sweeps' boots is offset by its own normal log draw, and measures how much
the second level changes the verdicts: A/A trials (two points with the same truth) through
``results.decide``, each point 2 boots × 3 rounds at the sweep's two Cs, every boot offset by
N(0, σ_boot) from the profile and every round by the within-boot σ this run measured (PP8's
rounds at C=8), decided once with the rounds pooled as one level (rounds-only intervals) and
once with each round's boot named (two-level intervals: the boot as the unit,
stats/decision.py). Printed side by side, one line each: their false-decision rates (goal for
the two-level one: ≤ 5 %, the rule's α), the share of trials whose verdict the second level
changed, the single-boot rate (one boot × 6 rounds: what an answer that says "single boot per
layout" holds), and the boots × rounds the rerun would plan for a 2 % gap at these σ.

Its figures must mean something, so the benchmark checks the rounds themselves
(docs/guides/decisions.md, "Rounds long enough to measure"):
- ``shortest round (real ms)``: the emulator's timer is good to ~1 ms (epoll rounds its timeouts
  to whole milliseconds), so ``MIN_ROUND_MS`` = 50 ms real is the shortest round whose spread
  the timer alone keeps within 2 %. The earlier smoke (4 requests, time scale 1000) had PP8
  rounds of ~13 ms: its INVALID spreads were the timer's;
- ``PP8 Input TPS, measured / model``: the median Input TPS of PP8 at C=8 over the emulator's
  model in virtual time (sim/model/vbench.py, the same workload, no clock): within
  ``MODEL_TOLERANCE`` the emulator kept up with real time; far below it, the machine was too
  busy for the time scale and the run measured the machine, not the layouts (at time scale
  1000 on a loaded 2-core machine: ~2,000 for the model's ~8,900).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchkit.processes import exit_on_stop_signals, stop_process  # noqa: E402

from pytest_ppsweep.results.answers import DECIDED  # noqa: E402
from pytest_ppsweep.results.decide import decide  # noqa: E402
from pytest_ppsweep.results.objective import PREFILL  # noqa: E402
from pytest_ppsweep.sim.model.placement import Layout  # noqa: E402
from pytest_ppsweep.sim.model.profile import load_profile  # noqa: E402
from pytest_ppsweep.sim.model.vbench import make_scheduler, run_round  # noqa: E402
from pytest_ppsweep.stats.decision import Sample  # noqa: E402
from pytest_ppsweep.stats.power import boots_for  # noqa: E402

SMOKE_REQUESTS = 40
MATRIX = REPO / "test_matrix" / "ppsweep.toml"
PP8 = "pp8-tp4-ep4"
MODEL_TOLERANCE = 0.10  # measured / model Input TPS within ±10 %
MIN_ROUND_MS = 50.0  # the shortest round (real time) whose 2 % spread a ~1 ms timer can measure
SLOWER = ("pp1-tp32-ep4", "pp2-tp16-ep4", "pp4-tp8-ep4", "pp16-tp2-ep2")
PROFILE = REPO / "pytest_ppsweep" / "sim" / "profiles" / "kimi-k3-6000d.toml"
BOOT_OFFSET_PCT = 1.0  # σ of the per-boot log offset this benchmark's profile copy models
BOOT_DRAWS, BOOT_DRAWS_SMOKE = 2000, 200  # A/A trials of the second-level figures


def _profile(folder: Path) -> Path:
    """The seeds' emulator profile with a per-boot offset of ``BOOT_OFFSET_PCT`` and its
    assumption written beside it."""
    text = PROFILE.read_text(encoding="utf-8")
    if "\nboot_offset_pct = 0.0\n" not in text:
        raise SystemExit(f"{PROFILE}: no 'boot_offset_pct = 0.0' line to set")
    text = text.replace("\nboot_offset_pct = 0.0\n", (
        "\n# bench_decisions.py: each boot offset by a normal log draw of σ "
        f"{BOOT_OFFSET_PCT:g} %. Assumption, not a\n# measurement (the seeds booted each layout "
        "once): of the order of the seeds' round spread.\n"
        f"boot_offset_pct = {BOOT_OFFSET_PCT!r}\n"))
    path = folder / "kimi-k3-6000d-boots.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _matrix(folder: Path) -> Path:
    """The seeds' sweep file and the cluster.toml it extends, the emulated clusters moved to
    addresses and ports of the benchmark's own."""
    text = (MATRIX.parent / "cluster.toml").read_text(encoding="utf-8")
    text = text.replace("127.0.6.", "127.0.63.").replace("127.0.7.", "127.0.64.")
    text = text.replace("port = 30000", "port = 30630").replace(
        "dist_init_port = 20000", "dist_init_port = 20630")
    if "127.0.63." not in text or "port = 30630" not in text:
        raise SystemExit("test_matrix/cluster.toml changed shape: no emulated cluster to move")
    named = 'PPSWEEP_SIM_PROFILE = "kimi-k3-6000d"'
    if named not in text:
        raise SystemExit("test_matrix/cluster.toml changed shape: no emulator profile to set")
    text = text.replace(named, f'PPSWEEP_SIM_PROFILE = "{_profile(folder)}"')
    (folder / "cluster.toml").write_text(text, encoding="utf-8")
    path = folder / "ppsweep.toml"
    path.write_text(MATRIX.read_text(encoding="utf-8"), encoding="utf-8")
    return path


def model_pp8_tps(num_requests: int) -> float:
    """The model's Input TPS of PP8 at C=8 on the seeds' workload (virtual time, median of 3
    seeded rounds)."""
    profile = load_profile("kimi-k3-6000d")
    return statistics.median(
        run_round(make_scheduler(profile, Layout(pp=8, tp=4, ep=4, nnodes=4),
                                 chunked_prefill_size=8192, seed=seed),
                  prompt_tokens=16384, output_tokens=1, concurrency=8,
                  num_requests=num_requests).input_tps
        for seed in range(3))


def one_run(folder: Path, run_id: str, smoke: bool, busy: bool) -> dict[str, object]:
    """One sweep; its exit status, wall time, extra rounds and layout answer."""
    args = [sys.executable, "-m", "pytest", "test_matrix", "-p", "no:cacheprovider", "-q",
            "--ppsweep-matrix", str(_matrix(folder)), "--ppsweep-reports", str(folder),
            "--ppsweep-run-id", run_id]
    if smoke:
        args += ["--ppsweep-config", "pp4,pp8", "--ppsweep-requests", str(SMOKE_REQUESTS),
                 "--ppsweep-time-scale", "200"]
    hog = (subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None)
    t0 = time.monotonic()
    sweep = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        out, err = sweep.communicate(timeout=1800)
    finally:
        # stopped early (a signal, a timeout): SIGTERM lets the sweep tear its ranks down
        stop_process(sweep, timeout_s=60)
        if hog is not None:
            hog.kill()
            hog.wait()
    done = subprocess.CompletedProcess(args, sweep.returncode, out, err)
    wall = time.monotonic() - t0
    run_dir = folder / run_id
    if not (run_dir / "answers.json").is_file():  # the sweep did not get as far as its answers
        sys.exit(f"the sweep wrote no answers.json (exit {done.returncode}):\n"
                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    answers = json.loads((run_dir / "answers.json").read_text(encoding="utf-8"))["answers"]
    layout = next((a for a in answers if a["kind"] == "layout"), {})
    with (run_dir / "results.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    extra = sum(r["extra"] == "True" for r in rows)
    # real milliseconds of the shortest round (duration_s is emulated: scaled by time_scale)
    shortest = min((float(r["duration_s"]) / float(r["time_scale"] or 1) * 1e3 for r in rows
                    if r["duration_s"]), default=float("nan"))
    pp8 = [float(r["input_tps"]) for r in rows
           if r["config_id"] == PP8 and r["concurrency"] == "8" and r["input_tps"]
           and r["completed"] == r["num_requests"]]
    return {"ret": done.returncode, "wall": wall, "extra": extra, "shortest_ms": shortest,
            "pp8_tps": statistics.median(pp8) if pp8 else math.nan,
            # the round noise within PP8's boot, σ of its log Input TPS at C=8, in %
            "pp8_sigma": (math.expm1(statistics.stdev(math.log(v) for v in pp8)) * 100
                          if len(pp8) >= 2 else math.nan),
            "status": layout.get("status"), "answer": layout.get("answer"),
            "rerun": layout.get("rerun"), "tail": done.stdout[-1500:]}


Verdict = tuple[str, str | None]  # a decision's status and winner


def _aa_trial(rng: random.Random, sigma_w: float, sigma_b: float, boots: int, rounds: int,
              concs: int, gap: float = 0.0) -> tuple[Verdict, Verdict]:
    """One trial: two points, ``a`` ``gap`` (log) above ``b`` (0: the same truth, A/A), each
    ``boots`` boots × ``rounds`` rounds at ``concs`` Cs (a boot's offset shared by its Cs),
    decided with the rounds pooled and with their boots named: ((status, winner) rounds-only,
    (status, winner) two-level)."""
    pooled: dict[str, dict[str, dict[int, list[float]]]] = {m: {} for m in PREFILL}
    named: dict[str, dict[str, dict[int, list[float]]]] = {m: {} for m in PREFILL}
    for point in ("a", "b"):
        for metric in PREFILL:
            offsets = [rng.gauss(0.0, sigma_b) for _ in range(boots)]
            for c in range(concs):
                values, tags = [], []
                for boot, off in enumerate(offsets):
                    for _ in range(rounds):
                        truth = gap if point == "a" and metric == PREFILL[0] else 0.0
                        values.append(1000.0 * math.exp(truth + off + rng.gauss(0.0, sigma_w)))
                        tags.append(f"{point}{boot}")
                pooled[metric].setdefault(point, {})[c] = values
                named[metric].setdefault(point, {})[c] = Sample(values, tags)
    concs_ = tuple(range(concs))
    one = decide(["a", "b"], PREFILL, pooled, concs_)
    two = decide(["a", "b"], PREFILL, named, concs_)
    return (one.status, one.winner), (two.status, two.winner)


def boot_level_figures(sigma_w_pct: float, draws: int, concs: int = 2) -> list[str]:
    """The second level's figures (module docstring), one RESULT line each."""
    rng = random.Random(37)
    sw, sb = math.log1p(sigma_w_pct / 100.0), math.log1p(BOOT_OFFSET_PCT / 100.0)
    both = [_aa_trial(rng, sw, sb, 2, 3, concs) for _ in range(draws)]
    rounds_only = sum(a[0] == DECIDED for a, _ in both) / draws * 100
    two = sum(b[0] == DECIDED for _, b in both) / draws * 100
    changed = sum(a[0] != b[0] for a, b in both) / draws * 100
    single = sum(_aa_trial(rng, sw, sb, 1, 6, concs)[1][0] == DECIDED
                 for _ in range(draws)) / draws * 100
    # the price: a true 2 % gap, decided for the faster point
    gap = [_aa_trial(rng, sw, sb, 2, 3, concs, math.log1p(0.02)) for _ in range(draws)]
    power_one = sum(a == (DECIDED, "a") for a, _ in gap) / draws * 100
    power_two = sum(b == (DECIDED, "a") for _, b in gap) / draws * 100
    k, n = boots_for(2.0, sigma_w_pct, BOOT_OFFSET_PCT)
    where = (f"σ_boot {BOOT_OFFSET_PCT:g} % (profile), σ_round {sigma_w_pct:.2f} % (measured), "
             f"{concs} C, {draws} trials")
    return [
        f"RESULT boot offset modelled in the profile copy: σ {BOOT_OFFSET_PCT:g} % per boot, "
        "an assumption | info",
        f"RESULT round noise within a boot, PP8 C=8: σ {sigma_w_pct:.2f} % | info",
        f"RESULT A/A false decisions, 2 boots x 3 rounds, rounds-only intervals: "
        f"{rounds_only:.1f} % ({where}) | info",
        f"RESULT A/A false decisions, 2 boots x 3 rounds, two-level intervals: {two:.1f} % "
        f"({where}) | goal <= 5 % | {'ok' if two <= 5.0 else 'not ok'}",
        f"RESULT verdicts changed by the second level: {changed:.1f} % of A/A trials | info",
        f"RESULT true 2 % gap decided, 2 boots x 3 rounds, rounds-only / two-level: "
        f"{power_one:.1f} % / {power_two:.1f} % (the second level's price in power) | info",
        f"RESULT A/A false decisions, single boot x 6 rounds (its answer says so): "
        f"{single:.1f} % ({where}) | info",
        f"RESULT rerun plan for a 2 % gap at these σ: {k} boots x {n} round{'s' if n != 1 else ''} "
        "per point | info",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--no-busy", action="store_true", help="no busy core")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    exit_on_stop_signals()  # a killed benchmark stops its busy core and its sweep with it
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-decisions-") as tmp:
        for i in range(args.runs):
            r = one_run(Path(tmp), f"decisions-{i}", args.smoke, not args.no_busy)
            results.append(r)
            print(f"run {i}: exit {r['ret']}, {r['status']} {r['answer']}, "
                  f"{r['extra']} extra round(s), {r['wall']:.0f} s")
            if r["ret"] != 0:
                print(r["tail"])
    passed = sum(r["ret"] == 0 for r in results)
    honest = sum((r["status"] == "decided" and r["answer"] == PP8)
                 or (r["status"] == "inconclusive" and bool(r["rerun"])) for r in results)
    slower = sum(r["answer"] in SLOWER for r in results)
    extra = sum(int(str(r["extra"])) for r in results)
    shortest = min(float(str(r["shortest_ms"])) for r in results)
    model = model_pp8_tps(SMOKE_REQUESTS if args.smoke else 40)
    ratio = statistics.median(float(str(r["pp8_tps"])) for r in results) / model
    n = len(results)
    print(f"RESULT runs exiting 0: {passed}/{n} | goal {n}/{n} | "
          f"{'ok' if passed == n else 'not ok'}")
    print(f"RESULT PP8 decided or inconclusive with a rerun: {honest}/{n} | goal {n}/{n} | "
          f"{'ok' if honest == n else 'not ok'}")
    print(f"RESULT a slower layout named: {slower}/{n} | goal 0/{n} | "
          f"{'ok' if slower == 0 else 'not ok'}")
    print(f"RESULT extra rounds: {extra} | info")
    print(f"RESULT shortest round (real ms): {shortest:.0f} | goal >= {MIN_ROUND_MS:.0f} | "
          f"{'ok' if shortest >= MIN_ROUND_MS else 'not ok'}")
    print(f"RESULT PP8 Input TPS, measured / model ({model:,.0f}): {ratio:.2f} | goal "
          f"1 ± {MODEL_TOLERANCE:.2f} | {'ok' if abs(ratio - 1) <= MODEL_TOLERANCE else 'not ok'}")
    sigmas = [float(str(r["pp8_sigma"])) for r in results if not math.isnan(float(str(
        r["pp8_sigma"])))]
    sigma_w = statistics.median(sigmas) if sigmas else 0.5  # no two valid rounds: 0.5 % assumed
    for line in boot_level_figures(sigma_w, BOOT_DRAWS_SMOKE if args.smoke else BOOT_DRAWS):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
