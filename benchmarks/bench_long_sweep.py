"""Long sweeps stay flat: the largest default sweep (64 points) in one pytest session.

Runs ``pytest`` on a sweep of 64 points (the axes parser's default cap,
``DEFAULT_MAX_POINTS``: the layouts PP4 × TP8 and PP8 × TP4 × an environment axis of 32
values) on one emulated cluster of 4 loopback nodes of 8 GPUs, at a high time scale, with the
shipped acceptance tests. A small conftest added to the sweep folder samples the pytest process
(the plugin's process) after the setup of every test: its RSS (``VmRSS``), threads
(``Threads``) and open files (``/proc/self/fd``). A layout's value is the least over its tests
(the layout before it torn down, this one booted; the least, so that a thread about to end is
not counted); the growth per layout is the least-squares slope of those values over the layouts
after the first (the first pays for imports, caches and pools).

Goals: ~0 after the first layout: threads and open files exactly 0 per layout (a leak of one
thread or socket per layout shows as 1.0), RSS below 0.25 MiB per layout (allocator noise; a
leak of the per-request records of one layout is ~1 MiB). ``--smoke`` (CI, via
tests/e2e/test_benchmark_smoke.py, whose entry requires every goal) runs 6 points (PP1 × TP8,
PP2 × TP4) on one node with one request each.

    python benchmarks/bench_long_sweep.py [--points 64] [--time-scale 400] [--smoke]

Ends with ``RESULT <figure>: <value> | goal <goal> | ok|not ok|info`` lines.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from support.matrices import emulated_cluster, sweep_head, workload  # noqa: E402

LAYOUTS = 2  # PP4 × TP8 and PP8 × TP4
GOALS = {"rss_mib": 0.25, "threads": 0.0, "open_files": 0.0}  # growth per layout, at most
CONFIGS = """
[[configs]]
pp = {nodes}
tp = 8

[[configs]]
pp = {pp2}
tp = 4

[axes.env]
PPSWEEP_BENCH_POINT = [{values}]
"""
# Sampled in the pytest process after every test: the plugin runs there.
CONFTEST = '''
import json, os, re

import pytest

OUT = {out!r}


def _sample():
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    return {{"rss_kib": int(status["VmRSS"].split()[0]), "threads": int(status["Threads"]),
             "open_files": len(os.listdir("/proc/self/fd"))}}


def _write(nodeid, layout):
    with open(OUT, "a") as fh:
        fh.write(json.dumps({{"nodeid": nodeid, "layout": layout, **_sample()}}) + "\\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield  # the earlier layout torn down, this one booted: one layout up
    _write(item.nodeid, re.sub(r"-c[0-9]+$", "", item.nodeid.rsplit("[", 1)[-1].rstrip("]")))


def pytest_sessionfinish(session):
    _write("", "(after the last teardown)")
'''


def slope(values: list[float]) -> float:
    """Least-squares slope of ``values`` over their index (0 for fewer than 2)."""
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(values) / n
    return sum((i - mx) * (v - my) for i, v in enumerate(values)) / sum(
        (i - mx) ** 2 for i in range(n))


def per_layout(samples: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per layout, in run order, the least of each figure over its tests' samples (each taken
    after the test's setup: the layout before torn down, this one booted; the least, so that a
    thread that is ending anyway is not counted); the session's last sample at the end."""
    least: dict[str, dict[str, object]] = {}
    for s in samples:
        key = str(s["layout"])
        if key in least:
            least[key] = {k: (min(v, s[k]) if isinstance(v, int) else v)  # type: ignore[call-overload]
                          for k, v in least[key].items()}
        else:
            least[key] = dict(s)
    return list(least.values())


def run(points: int, requests: int, scale: float, port: int, net: str, nodes: int) -> tuple[
        list[dict[str, object]], float, int]:
    with tempfile.TemporaryDirectory(prefix="bench-long-") as tmp_dir:
        tmp = Path(tmp_dir)
        folder = tmp / "sweep"
        folder.mkdir()
        values = ", ".join(f'"{i}"' for i in range(points // LAYOUTS))
        configs = CONFIGS.format(nodes=nodes, pp2=2 * nodes, values=values)
        (folder / "ppsweep.toml").write_text(
            sweep_head("long", configs, cluster="bench-long", boot_timeout_s=120)
            + workload(1024, (2,), requests, 1)
            + emulated_cluster("bench-long", net, port, port + 1, scale, tmp / "state", nodes))
        (folder / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
        out = tmp / "samples.jsonl"
        (folder / "conftest.py").write_text(CONFTEST.format(out=str(out)))
        cmd = [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
               "--ppsweep-reports", str(tmp / "reports"), "--ppsweep-time-scale", str(scale)]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                              check=False)
        took = time.perf_counter() - t0
        if not out.exists():
            sys.exit(f"{' '.join(cmd)} exited {done.returncode} without samples:\n"
                     f"{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
        samples = [json.loads(line) for line in out.read_text().splitlines()]
        if done.returncode:
            print(done.stdout[-6000:], file=sys.stderr)
        return per_layout(samples), took, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=64)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--time-scale", type=float, default=400.0)
    parser.add_argument("--port", type=int, default=44600)
    parser.add_argument("--net", default="127.0.49")
    parser.add_argument("--nodes", type=int, default=4, choices=(1, 2, 4),
                        help="nodes of the emulated cluster (8 GPUs each; the layouts are "
                             "PP<nodes> x TP8 and PP<2 nodes> x TP4)")
    parser.add_argument("--smoke", action="store_true",
                        help="6 points on 1 node, 1 request each (CI)")
    args = parser.parse_args(argv)
    points, requests, nodes = ((6, 1, 1) if args.smoke
                               else (args.points, args.requests, args.nodes))
    scale = 2000.0 if args.smoke else args.time_scale
    if points % LAYOUTS or points < 6:
        parser.error(f"--points: expected an even number >= 6, found {points}")
    samples, took, rc = run(points, requests, scale, args.port, args.net, nodes)
    layouts, end = samples[:-1], samples[-1]
    print(f"{len(layouts)} layouts on {nodes} emulated nodes in one session, {took:.1f} s "
          f"(pytest exit {rc})")
    print(f"{'layout':<40} {'RSS MiB':>8} {'threads':>8} {'files':>6}")
    for s in layouts:
        print(f"{s['layout']:<40} {int(s['rss_kib']) / 1024:8.1f} {s['threads']:>8} "  # type: ignore[call-overload]
              f"{s['open_files']:>6}")
    print(f"{end['layout']:<40} {int(end['rss_kib']) / 1024:8.1f} {end['threads']:>8} "  # type: ignore[call-overload]
          f"{end['open_files']:>6}")
    after_first = layouts[1:]
    growth = {
        "rss_mib": slope([int(s["rss_kib"]) / 1024 for s in after_first]),  # type: ignore[call-overload]
        "threads": slope([float(s["threads"]) for s in after_first]),  # type: ignore[arg-type]
        "open_files": slope([float(s["open_files"]) for s in after_first]),  # type: ignore[arg-type]
    }
    complete = len(layouts) == points and rc == 0
    print(f"RESULT layouts run in one session: {len(layouts)} | goal {points} | "
          f"{'ok' if complete else 'not ok'}")
    for key, unit in (("rss_mib", "MiB"), ("threads", "threads"), ("open_files", "files")):
        ok = growth[key] <= GOALS[key] + 1e-9
        print(f"RESULT {key.replace('_', ' ')} growth per layout after the first: "
              f"{growth[key]:.3f} {unit} | goal <= {GOALS[key]:g} | {'ok' if ok else 'not ok'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
