"""Cluster time on Slurm: one allocation for the whole sweep versus one job per layout.

Runs the same sweep (the seeds' layouts on four emulated 8-GPU nodes of the test Slurm:
scripts/provision_slurm.sh) twice, side by side in one invocation, through the plugin end to end:

* **one allocation**: ``pytest <sweep>``: one ``salloc`` for the sweep, one step per layout;
* **job per layout** (how srtctl and InferenceX submit): ``pytest <sweep> --ppsweep-config <id>``
  once per layout, each run making and releasing its own allocation.

Each submission waits in a real Slurm queue: just before each run, a job of "another user"
(``sbatch --nodes 4``) holds every node until ``--queue-wait`` seconds after the run's ``salloc``
asked for nodes, so the allocation waits behind it in Slurm's queue, as on a shared cluster (the
wait is chosen; Slurm's own scheduler makes it). A sampler reads ``squeue`` every 0.2 s: how
long each ppsweep allocation was held (node-seconds) and how long it waited. Prints the
wall-time ratio (job per layout / one allocation; goal > 1: one allocation is faster), the
node-seconds ratio and the waits.

    python benchmarks/bench_slurm_allocation.py [--smoke] [--queue-wait 10] [--time-scale 200]

Needs root (the test Slurm runs slurmd in network namespaces); provisions it when not running.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = Path(os.environ.get("PPSWEEP_SLURM_ROOT", "/tmp/ppsweep-slurm"))
LAYOUTS = ("pp1-tp32-ep4", "pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2")
CLUSTER = """
[clusters.bench-slurm]
kind = "slurm"
nodes = 4
gpus_per_node = 8
request_gpus = false
server_module = "pytest_ppsweep.sim"
python = "{python}"
port = 30000
dist_init_port = 20000
nvidia_smi = ["env", "PPSWEEP_SIM_STATE_DIR={state}", "{python}", "-m", "pytest_ppsweep.sim.smi",
              "--host", "{{host}}"]

[clusters.bench-slurm.env]
PPSWEEP_SIM_TIME_SCALE = "{scale}"
PPSWEEP_SIM_STATE_DIR = "{state}"
PPSWEEP_SIM_PROFILE = "kimi-k3-6000d"
"""


def slurm(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True,
                          timeout=60).stdout


@dataclass
class Sampler:
    """ppsweep jobs seen in squeue: first seen pending/running, last seen, nodes."""

    jobs: dict[str, dict[str, float]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            out = subprocess.run(["squeue", "--noheader", "--format", "%i|%j|%T|%D"],
                                 capture_output=True, text=True, check=False).stdout
            for line in out.splitlines():
                jobid, name, state, nodes = line.strip().split("|")
                if not name.startswith("ppsweep-"):
                    continue
                job = self.jobs.setdefault(jobid, {"seen": now, "nodes": float(nodes)})
                if state == "RUNNING":
                    job.setdefault("start", now)
                    job["last"] = now
            self.stop.wait(0.2)

    def held(self, jobids: set[str]) -> tuple[float, float]:
        """(node-seconds held, seconds waited) over ``jobids``."""
        held = waited = 0.0
        for jobid in jobids:
            job = self.jobs[jobid]
            if "start" in job:
                held += (job["last"] - job["start"] + 0.2) * job["nodes"]
                waited += job["start"] - job["seen"]
        return held, waited


def provision() -> None:
    if os.geteuid() != 0:
        sys.exit("bench_slurm_allocation: needs root (the test Slurm runs in network namespaces)")
    for script in ("install_slurm.sh", "provision_slurm.sh"):
        res = subprocess.run(["bash", str(REPO / "scripts" / script)], capture_output=True,
                             text=True, check=False)
        if res.returncode:
            sys.exit(f"scripts/{script} failed:\n{res.stdout}{res.stderr}")
    os.environ["SLURM_CONF"] = str(ROOT / "slurm.conf")


def other_users_job(wait_s: float, sampler: Sampler) -> threading.Thread | None:
    """Every node taken by someone else's job until ``wait_s`` after the next ppsweep job asks
    for nodes (it is then PENDING behind it): a queue wait of ``wait_s``, made by Slurm."""
    if wait_s <= 0:
        return None
    jobid = slurm("sbatch", "--parsable", "--nodes", "4", "--job-name", "bench-other",
                  "--output", "/dev/null", "--wrap", "sleep 3600").strip()
    deadline = time.monotonic() + 60
    while slurm("squeue", "--noheader", "--jobs", jobid, "--format", "%T").strip() != "RUNNING":
        if time.monotonic() > deadline:
            sys.exit(f"the other user's job {jobid} did not start within 60 s")
        time.sleep(0.1)
    known = set(sampler.jobs)

    def release() -> None:
        end = time.monotonic() + 600
        while not set(sampler.jobs) - known and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(wait_s)
        slurm("scancel", jobid)

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    return thread


def timed_pytest(folder: Path, reports: Path, *args: str) -> float:
    cmd = [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
           "--ppsweep-reports", str(reports), *args]
    start = time.perf_counter()
    res = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if res.returncode not in (0, 1):  # 1: a test failed (a wide spread on a busy machine)
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-4000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true",
                    help="one layout, 4 requests, 1 repeat, time scale 1000, 1 s queue wait "
                         "(both ways of submitting, once each: the code path, not a ratio)")
    ap.add_argument("--queue-wait", type=float, default=10.0)
    ap.add_argument("--time-scale", type=float, default=200.0)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    layouts = LAYOUTS
    if args.smoke:
        layouts = ("pp8-tp4-ep4",)
        args.queue_wait, args.time_scale, args.requests, args.repeats = 1.0, 1000.0, 4, 1
    provision()
    sampler = Sampler()
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sweep"
        folder.mkdir()
        state = Path(tmp) / "sim-state"
        state.mkdir()
        text = (REPO / "test_matrix" / "ppsweep.toml").read_text()
        text = text.replace('cluster = "local"', 'cluster = "bench-slurm"')
        model = Path(tmp) / "model"  # the emulator reads nothing of it; the preflight wants it
        model.mkdir()
        text = text.replace('model_path = "/data/hf_models/Kimi-K3"', f'model_path = "{model}"')
        text = text.replace('devices = ["/dev/infiniband"]', "devices = []")
        text += CLUSTER.format(python=sys.executable, state=state, scale=args.time_scale)
        (folder / "ppsweep.toml").write_text(text)
        (folder / "cluster.toml").write_text((REPO / "test_matrix" / "cluster.toml").read_text())
        (folder / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
        common = ["--ppsweep-requests", str(args.requests), "--ppsweep-repeats",
                  str(args.repeats), "--ppsweep-config", ",".join(layouts)]

        seen = set(sampler.jobs)
        other_users_job(args.queue_wait, sampler)
        one_s = timed_pytest(folder, Path(tmp) / "one", *common)
        time.sleep(0.5)  # one more squeue sample after the release
        one_jobs = set(sampler.jobs) - seen

        seen = set(sampler.jobs)
        per_s = 0.0
        for layout in layouts:
            other_users_job(args.queue_wait, sampler)
            per_s += timed_pytest(folder, Path(tmp) / "per", *common[:-1], layout)
        time.sleep(0.5)
        per_jobs = set(sampler.jobs) - seen
    sampler.stop.set()
    thread.join()
    one_held, one_wait = sampler.held(one_jobs)
    per_held, per_wait = sampler.held(per_jobs)
    ratio = per_s / one_s
    print(f"{len(layouts)} layouts on 4 Slurm nodes, time scale {args.time_scale:g}, "
          f"{args.requests} requests x {args.repeats} repeats; each submission queued behind "
          f"{args.queue_wait:g} s of another job; {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f}")
    print(f"  one allocation:   wall {one_s:7.1f} s, {len(one_jobs)} allocation(s), "
          f"waited {one_wait:5.1f} s, held {one_held:7.1f} node-s")
    print(f"  job per layout:   wall {per_s:7.1f} s, {len(per_jobs)} allocation(s), "
          f"waited {per_wait:5.1f} s, held {per_held:7.1f} node-s")
    ok = "ok" if ratio > 1.0 else "not ok"
    print(f"RESULT slurm job-per-layout / one-allocation wall time: {ratio:.2f} | goal > 1.0 "
          f"| {ok}")
    print(f"RESULT slurm job-per-layout / one-allocation node-seconds held: "
          f"{per_held / max(one_held, 1e-9):.2f} | info")
    print(f"RESULT slurm allocations (one allocation, job per layout): {len(one_jobs)}, "
          f"{len(per_jobs)} | info")


if __name__ == "__main__":
    main()
