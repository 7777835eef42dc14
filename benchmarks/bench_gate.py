"""How often the gate cries wolf, and how often it sees a real slowdown, on the emulator.

Runs a small sweep (PP4/TP8 and PP8/TP4, C=4 and C=8, 3 repeats of a few 16,384-token
requests) on 4 emulated nodes: one reference run, ``--reruns`` reruns of the same "image"
(the shipped profile, unchanged) and ``--slow-reruns`` runs with each injected compute slowdown
(a perturbed copy of the profile whose ``[compute] chunk_gpu_seconds`` is 2 %, 5 % and 10 %
larger, pointed at by ``PPSWEEP_SIM_PROFILE``). Every run is compared with the reference by
``gate.compare`` (what ``--ppsweep-compare`` runs), per layout × C × gated metric ("point").

* false-alarm rate: points of the same-image reruns whose verdict is not ``within noise``
  (goal <= 5 %); those failing the gate (regression, or inconclusive: worse than the threshold
  within the noise) are counted apart;
* detection: for each slowdown and point, the true change is the median over its runs of the
  point's median versus the median over the same-image runs (reference included), and the
  noise is the median noise the gate reported for that point over the same-image reruns; of the
  points whose true change is beyond 3 × that noise, the share shown as a change (significant,
  regression or improvement) (goal >= 95 %); of the points whose true change is worse than the
  threshold, the share failing the gate, as a regression or inconclusive (goal 100 %).

The noise rule is stats/gatenoise.py's (``NOISE_RULE``); ``--old-rule`` also evaluates the earlier
one (the larger (max − min)/median spread of the two runs) on the same runs. ``--keep DIR``
keeps the run folders, ``--reuse DIR`` evaluates them again without a sweep (the rates depend
on the load of the machine while the sweeps ran: keep the runs of a quiet machine).

    python benchmarks/bench_gate.py [--time-scale 100] [--requests 16] [--reruns 10] [--old-rule]
        [--smoke]

``--smoke``: PP8/TP4 alone, one rerun and one run at +10 % compute, 2 requests at time scale
1000, on ports of its own (the same code path in well under a minute; its rates mean nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchkit.results import Result, add_smoke, goal, info, print_results  # noqa: E402

from pytest_ppsweep.gate import comparison  # noqa: E402
from pytest_ppsweep.gate.comparison import Comparison, compare  # noqa: E402
from pytest_ppsweep.stats.gatenoise import NOISE_RULE  # noqa: E402

PROFILE = REPO / "pytest_ppsweep" / "sim" / "profiles" / "kimi-k3-6000d.toml"
MATRIX = """
[sweep]
name = "bench-gate"
model_path = "/data/hf_models/Kimi-K3"
ep_cap = 4
boot_timeout_s = 120
spread_rule = "warn"          # the gate is measured here, not the validity of each point

[server]
moe_runner_backend = "flashinfer_mxfp4"
moe_a2a_backend = "none"
chunked_prefill_size = 8192
disable_radix_cache = true
mem_fraction_static = 0.88

[[configs]]
pp = 4
tp = 8

[[configs]]
pp = 8
tp = 4

[workload]
input_len = 16384
output_len = 1
concurrency = [4, 8]
num_requests = {requests}
repeats = 3
vocab_size = 163840

[clusters.bench]
kind = "local"
hosts = ["127.0.64.1", "127.0.64.2", "127.0.64.3", "127.0.64.4"]
gpus_per_node = 8
server_module = "pytest_ppsweep.sim"
port = {port}
dist_init_port = {dist_port}
nvidia_smi = ["{{python}}", "-m", "pytest_ppsweep.sim.smi", "--host", "{{host}}"]
env = {env}
"""
CHANGED = {"significant", "regression", "improvement", comparison.INCONCLUSIVE}
Key = tuple[str, int, str]


def perturbed_profile(folder: Path, slowdown: float) -> Path:
    """A copy of the shipped profile whose compute takes ``slowdown`` longer."""
    text = PROFILE.read_text(encoding="utf-8")
    match = re.search(r"^chunk_gpu_seconds = ([0-9.]+)", text, re.M)
    assert match, f"{PROFILE}: no chunk_gpu_seconds"
    value = float(match.group(1)) * (1.0 + slowdown)
    path = folder / f"slow-{slowdown * 100:g}pct.toml"
    path.write_text(text[:match.start(1)] + f"{value:.6f}" + text[match.end(1):], encoding="utf-8")
    return path


def sweep_run(tmp: Path, profile: Path, args: argparse.Namespace, tag: str) -> Path:
    """One sweep with ``profile``; its run folder."""
    folder = tmp / f"sweep-{tag}"
    folder.mkdir()
    env_table = (f'{{ PPSWEEP_SIM_TIME_SCALE = "{args.time_scale}", PPSWEEP_SIM_STATE_DIR = '
                 f'"{tmp / "sim-state"}", PPSWEEP_SIM_PROFILE = "{profile}" }}')
    (folder / "ppsweep.toml").write_text(MATRIX.format(requests=args.requests, env=env_table,
                                                          port=args.port,
                                                          dist_port=args.port - 10000))
    (folder / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
    reports = tmp / "reports" / tag
    cmd = [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
           "-p", "no:xdist", "--ppsweep-reports", str(reports),
           *(["--ppsweep-config", args.config] if args.config else [])]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, check=False, env=env)
    runs = [p for p in reports.iterdir() if p.is_dir()] if reports.is_dir() else []
    # 1: a test failed (a point the emulator made INVALID); the gate still reads its rounds.
    if res.returncode not in (0, 1) or len(runs) != 1:
        sys.exit(f"{tag}: {' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}")
    return runs[0]


def by_key(rows: list[Comparison]) -> dict[Key, Comparison]:
    """The gate's measured rows by point; the outputs and task-score rows are not timings."""
    return {(r.config_id, r.concurrency, r.metric): r for r in rows
            if r.metric in comparison.METRICS}


def run_folder(tmp: Path, tag: str) -> Path:
    """The run folder a kept sweep ``tag`` left under ``tmp`` (``--reuse``)."""
    runs = [p for p in (tmp / "reports" / tag).iterdir() if p.is_dir()]
    if len(runs) != 1 or not (runs[0] / "summary.csv").exists():
        sys.exit(f"{tmp}: sweep {tag} is missing or unfinished")
    return runs[0]


@contextlib.contextmanager
def sweeps(args: argparse.Namespace, slowdowns: list[float]) -> Iterator[dict[str, Path]]:
    """{tag: run folder} of the reference, the same-image reruns and the slowed runs: run now
    (kept under ``--keep``), or read back from ``--reuse``. The folders exist until the ``with``
    block ends (a temporary folder without ``--keep``)."""
    if args.reuse is not None:
        tags = (["ref"] + [f"same{i}" for i in range(args.reruns)]
                + [f"slow{s:g}-{i}" for s in slowdowns for i in range(args.slow_reruns)])
        yield {tag: run_folder(args.reuse, tag) for tag in tags}
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with (tempfile.TemporaryDirectory() if args.keep is None
          else contextlib.nullcontext(str(args.keep))) as name:
        tmp = Path(name)
        runs = {"ref": sweep_run(tmp, PROFILE, args, "ref")}
        for i in range(args.reruns):
            runs[f"same{i}"] = sweep_run(tmp, PROFILE, args, f"same{i}")
        for s in slowdowns:
            profile = perturbed_profile(tmp, s)
            for i in range(args.slow_reruns):
                runs[f"slow{s:g}-{i}"] = sweep_run(tmp, profile, args, f"slow{s:g}-{i}")
        yield runs


def old_rule(ref: Sequence[float], cur: Sequence[float]) -> float:
    """The rule before stats/gatenoise.py: the larger (max − min) / median of the two runs, in %."""
    def spread(v: Sequence[float]) -> float:
        med = statistics.median(v)
        return (max(v) - min(v)) / med * 100.0 if med else 0.0
    return max(spread(ref), spread(cur))


def evaluate(runs: dict[str, Path], args: argparse.Namespace, slowdowns: list[float],
             rule: str, verbose: bool, label: str = "") -> list[Result]:
    """Compare every run with the reference under the gate's rule (``rule``: its text), print
    the false-alarm and detection rates against the goals and return them as figures (names
    prefixed by ``label``)."""
    ref = runs["ref"]
    same = [by_key(compare(runs[f"same{i}"], ref)) for i in range(args.reruns)]
    slow = {s: [by_key(compare(runs[f"slow{s:g}-{i}"], ref)) for i in range(args.slow_reruns)]
            for s in slowdowns}
    keys = sorted(same[0])
    verdicts = [rows[k].verdict for rows in same for k in keys]
    alarms = sum(v != "within noise" for v in verdicts)
    false_reg = sum(v in comparison.FAILING for v in verdicts)
    print(f"\n== noise rule: {rule}")
    print(f"time scale {args.time_scale:g}, {args.requests} requests × 3 repeats, "
          f"{len(keys)} points ({len({k[0] for k in keys})} layouts × 2 C × "
          f"{len({k[2] for k in keys})} metrics)")
    print(f"same image, {args.reruns} reruns vs the reference: {alarms}/{len(verdicts)} points "
          f"shown as a change ({alarms / len(verdicts):.1%}; goal <= 5 %), "
          f"{false_reg} failing the gate (regression or inconclusive)")
    results = [
        goal(f"{label}false alarms (same image)", f"{alarms}/{len(verdicts)} points "
             f"({alarms / len(verdicts):.1%})", "<= 5 %", alarms / len(verdicts) <= 0.05),
        info(f"{label}false failures (same image, regression or inconclusive)",
             f"{false_reg}/{len(verdicts)} points"),
    ]
    noise = {k: statistics.median(rows[k].noise_pct or 0.0 for rows in same) for k in keys}
    # The true value of a point: the median over the same-image runs (reference included).
    truth = {k: statistics.median([same[0][k].ref or 0.0, *(rows[k].cur or 0.0 for rows in same)])
             for k in keys}
    print(f"median noise per point: {min(noise.values()):.2f}…{max(noise.values()):.2f} %")
    detect_n = detect_ok = beyond_n = beyond_ok = 0
    for s in slowdowns:
        shown_all = [rows[k].verdict for rows in slow[s] for k in keys]
        print(f"compute +{s:.0%}: {sum(v in CHANGED for v in shown_all)}/{len(shown_all)} "
              f"comparisons shown as a change, {shown_all.count('regression')} regressions, "
              f"{shown_all.count(comparison.INCONCLUSIVE)} inconclusive")
        for k in keys:
            cur = statistics.median(rows[k].cur or 0.0 for rows in slow[s])
            true = (cur / truth[k] - 1.0) * 100.0
            shown = [rows[k].verdict for rows in slow[s]]
            deltas = ", ".join(f"{rows[k].delta_pct:+.2f}" for rows in slow[s])
            th = slow[s][0][k].threshold_pct or 0.0
            worse = true < th if th < 0 else true > th
            flags = []
            if abs(true) > 3 * noise[k]:
                detect_n += len(shown)
                ok = sum(v in CHANGED for v in shown)
                detect_ok += ok
                flags.append(f"beyond 3× noise: {ok}/{len(shown)} shown")
            if worse:
                beyond_n += len(shown)
                ok = sum(v in comparison.FAILING for v in shown)
                beyond_ok += ok
                flags.append(f"beyond threshold: {ok}/{len(shown)} fail")
            if verbose:
                print(f"  {k[0]:<13} C={k[1]:<2} {k[2]:<9} true {true:+6.2f} % (noise "
                      f"{noise[k]:.2f} %), Δ {deltas} → {', '.join(shown)}"
                      + (f"  [{'; '.join(flags)}]" if flags else ""))
    if detect_n:
        print(f"detection beyond 3× noise: {detect_ok}/{detect_n} ({detect_ok / detect_n:.1%}; "
              "goal >= 95 %)")
        results.append(goal(f"{label}detection beyond 3× noise",
                            f"{detect_ok}/{detect_n} ({detect_ok / detect_n:.1%})", ">= 95 %",
                            detect_ok / detect_n >= 0.95))
    else:
        results.append(info(f"{label}detection beyond 3× noise",
                            "inconclusive (no point's true change beyond 3× its noise)"))
    if beyond_n:
        print(f"beyond the threshold failing: {beyond_ok}/{beyond_n} "
              f"({beyond_ok / beyond_n:.1%}; goal 100 %)")
        results.append(goal(f"{label}beyond the threshold failing",
                            f"{beyond_ok}/{beyond_n} ({beyond_ok / beyond_n:.1%})", "100 %",
                            beyond_ok == beyond_n))
    else:
        results.append(info(f"{label}beyond the threshold failing",
                            "inconclusive (no point's true change beyond the threshold)"))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--time-scale", type=float, default=100.0)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--reruns", type=int, default=10)
    ap.add_argument("--slow-reruns", type=int, default=2)
    ap.add_argument("--slowdowns", default="0.02,0.05,0.10")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep the run folders here (an empty or new folder) instead of a "
                         "temporary one")
    ap.add_argument("--reuse", type=Path, default=None,
                    help="no sweep: read the run folders a --keep run left there")
    ap.add_argument("--old-rule", action="store_true",
                    help="also evaluate the earlier noise rule (the larger spread) on the same "
                         "runs, for comparison")
    ap.add_argument("--port", type=int, default=30240,
                    help="HTTP port of the emulated nodes (rendezvous: port - 10000)")
    ap.add_argument("--config", help="only these layouts (--ppsweep-config), e.g. pp8")
    add_smoke(ap, "PP8 alone, 1 rerun, 1 run at +10 %% compute, 2 requests, time scale 1000")
    args = ap.parse_args(argv)
    if args.smoke:
        args.reruns, args.slow_reruns, args.slowdowns = 1, 1, "0.10"
        args.requests, args.time_scale, args.port, args.config = 2, 1000.0, 30250, "pp8"
    slowdowns = [float(s) for s in args.slowdowns.split(",")]
    start = time.perf_counter()
    load0 = os.getloadavg()
    with sweeps(args, slowdowns) as runs:
        elapsed = time.perf_counter() - start
        results = evaluate(runs, args, slowdowns, NOISE_RULE, verbose=True)
        if args.old_rule:
            with mock.patch.object(comparison, "noise_pct", old_rule):
                results += evaluate(runs, args, slowdowns, "(earlier) |Δ| > max(spread_ref, "
                                    "spread_cur), spread = (max − min) / median", verbose=False,
                                    label="earlier rule, ")
    if args.reuse is None:
        print(f"\n{len(runs)} runs in {elapsed:.0f} s; cores: {os.cpu_count()}, load average "
              f"(1 min): {load0[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
        results.append(info("load average (1 min), start → end",
                            f"{load0[0]:.2f} → {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"))
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
