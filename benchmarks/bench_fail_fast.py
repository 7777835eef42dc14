"""How fast does a layout whose rank dies mid-round fail? (liveness, service/liveness.py)

Boots a 4-node layout, starts a round (``SweepRun.run_rounds``, as ``test_prefill`` does) and,
once the round's first request completed, either SIGKILLs rank 2's process (``kill``) or
appends a fatal line to rank 2's log (``fatal``: ``RuntimeError: CUDA error: an illegal memory
access``, as a crashing scheduler prints it while its process still runs). Measures the real
seconds from that moment until ``run_rounds`` raised ``LayoutDead`` (the test's failure), and
prints them beside their ratio to the 10 s boot-poll interval of SGLang's own test helpers
(``popen_launch_server`` polls ``/health`` every 10 s). Goal: ≤ 2 s.

Backends: ``emulator`` (``python -m pytest_ppsweep.sim``, loopback 127.0.62.11-14) and
``sglang`` (real SGLang 0.5.23 on CPU as provisioned by scripts/provision_sglang_cpu.sh, PP4,
loopback 127.0.62.21-24; skipped with a note when not provisioned). On real SGLang a dead PP
stage makes rank 0's requests hang until its watchdog (300 s by default): without the watch the
round would not end before ``round_timeout_s``.

    python benchmarks/bench_fail_fast.py [--backend emulator,sglang] [--repeats 1] [--smoke]

``--smoke``: the emulator alone, SIGKILL and fatal line once each (real SGLang's boot is what
tests/real runs).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.benchkit.provisioned import DEFAULT_MODELS, DEFAULT_SGLANG_PYTHON
from benchmarks.benchkit.results import Result, add_smoke, finish, goal
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.run.sweeprun import SweepRun
from pytest_ppsweep.service.liveness import POLL_S, LayoutDead

SGLANG_TEST_POLL_S = 10.0  # sglang.test.test_utils.popen_launch_server: /health every 10 s
GOAL_S = 2.0
FATAL = "RuntimeError: CUDA error: an illegal memory access was encountered\n"

EMULATOR = """
[sweep]
name = "failfast-emu"
model_path = "/data/hf_models/Kimi-K3"
ep_cap = 4
boot_timeout_s = 60

[server]
moe_runner_backend = "flashinfer_mxfp4"
moe_a2a_backend = "none"
chunked_prefill_size = 8192
disable_radix_cache = true

[[configs]]
pp = 4
tp = 8

[workload]
input_len = 16384
output_len = 1
concurrency = [4]
num_requests = 200
repeats = 1
vocab_size = 1000
round_timeout_s = 300

[clusters.local]
kind = "local"
hosts = ["127.0.62.11", "127.0.62.12", "127.0.62.13", "127.0.62.14"]
gpus_per_node = 8
server_module = "pytest_ppsweep.sim"
port = 34621
dist_init_port = 35621
nvidia_smi = []
env = { PPSWEEP_SIM_TIME_SCALE = "100", PPSWEEP_SIM_STATE_DIR = "{state}" }
"""


def sglang_matrix(python: Path, models: Path) -> str:
    cpu = (Path(__file__).resolve().parents[1] / "test_matrix" / "cpu.toml").read_text()
    head, _, rest = cpu.partition("[[configs]]")
    _, _, tail = rest.partition("[workload]")
    text = (
        head.replace('name = "cpu-sglang"', 'name = "failfast-sglang"')
        .replace('baseline = "pp1-tp4"', 'baseline = "pp4-tp1"')
        .replace("~/.cache/pytest-ppsweep/models", str(models))
        + "[[configs]]\npp = 4\ntp = 1\n\n[workload]"
        + tail
    )
    for old, new in (
        ("concurrency = [2, 4]", "concurrency = [2]"),
        ("num_requests = 16", "num_requests = 200"),
        ("repeats = 3", "repeats = 1"),
        ("127.0.6.", "127.0.62.2"),
        ("port = 34000", "port = 34622"),
        ("dist_init_port = 35000", "dist_init_port = 35622"),
        ("~/.cache/pytest-ppsweep/venv-sglang-0.5.23/bin/python", str(python)),
    ):
        assert old in text, old
        text = text.replace(old, new)
    return text


def one(matrix: Path, reports: Path, how: str) -> tuple[float, str]:
    """Boot, start a round, break rank 2 after its first request; seconds until LayoutDead."""
    sweep = load(matrix)
    store = RunStore(reports, f"{sweep.name}-{how}-{time.time_ns()}")
    run = SweepRun(sweep, sweep.pool(None), store)
    config = sweep.configs[0]
    booted = run.boot(config)
    raw = store.dir / "raw" / config.id / f"c{sweep.workload.concurrency[0]}-r1.jsonl"
    broke: list[float] = []

    def breaker() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if raw.exists() and raw.read_text().strip():
                break
            time.sleep(0.005)
        if how == "kill":
            pid = booted.service.procs[2].pid  # type: ignore[attr-defined]
            broke.append(time.monotonic())
            os.kill(pid, signal.SIGKILL)
        else:
            with booted.service.log_path(2).open("a") as fh:
                broke.append(time.monotonic())
                fh.write(FATAL)

    thread = threading.Thread(target=breaker, daemon=True)
    thread.start()
    try:
        run.run_rounds(booted, sweep.workload.concurrency[0])
    except LayoutDead as exc:
        failed, cause = time.monotonic(), str(exc).splitlines()[0]
    else:
        failed, cause = float("nan"), "round ended without LayoutDead"
    finally:
        run.teardown(booted)
        run.close()
    thread.join(5)
    if not broke:
        return float("nan"), "never broke rank 2 (no request completed)"
    return failed - broke[0], cause


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="emulator,sglang")
    ap.add_argument("--repeats", type=int, default=1)
    add_smoke(ap, "the emulator alone, once each")
    args = ap.parse_args()
    if args.smoke:
        args.backend, args.repeats = "emulator", 1
    rows: list[tuple[str, str, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="failfast-") as tmp:
        root = Path(tmp)
        for backend in args.backend.split(","):
            matrix = root / f"{backend}.toml"
            if backend == "emulator":
                matrix.write_text(EMULATOR.replace("{state}", str(root / "sim-state")))
            else:
                python = Path(os.environ.get("PPSWEEP_SGLANG_PYTHON") or DEFAULT_SGLANG_PYTHON)
                if not python.exists() or not (DEFAULT_MODELS / "tiny-qwen3moe").is_dir():
                    print(f"sglang: not provisioned ({python}): scripts/provision_sglang_cpu.sh")
                    continue
                matrix.write_text(sglang_matrix(python, DEFAULT_MODELS))
            for how in ("kill", "fatal"):
                for _ in range(args.repeats):
                    t0 = time.monotonic()
                    seconds, cause = one(matrix, root / "reports", how)
                    print(f"[{backend} {how}] {seconds:.3f} s to failure "
                          f"({time.monotonic() - t0:.0f} s with boot): {cause}", flush=True)
                    rows.append((backend, how, seconds, cause))
    print()
    print(f"liveness poll {POLL_S} s; reference: SGLang test helpers poll every "
          f"{SGLANG_TEST_POLL_S:.0f} s; goal ≤ {GOAL_S:.0f} s")
    print(f"{'backend':<10}{'what':<8}{'death → failure':>17}{'ratio vs 10 s':>15}{'goal':>7}")
    figures: list[Result] = []
    for backend, how, seconds, _cause in rows:
        ok = seconds <= GOAL_S
        what = "SIGKILL" if how == "kill" else "fatal"
        print(f"{backend:<10}{what:<8}{seconds:>15.3f} s"
              f"{seconds / SGLANG_TEST_POLL_S:>15.3f}{'ok' if ok else 'MISS':>7}")
        figures.append(goal(f"{backend} {what} death to failure", f"{seconds:.3f} s",
                            f"<= {GOAL_S:.0f} s", ok))
    return finish(figures, args.smoke)


if __name__ == "__main__":
    raise SystemExit(main())
