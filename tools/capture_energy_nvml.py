"""Capture real GPU energy data on a GPU host: what tests/data/energy-<gpu>/ is made of.

    python3 tools/capture_energy_nvml.py OUT_DIR [--gpu 0] [--idle-s 6] [--load-s 12]

Needs nvidia-ml-py (``pynvml``), torch with CUDA and ``nvidia-smi``; nothing of this project.
Three phases on one GPU: idle, a known matrix-product load (bf16 GEMMs of a fixed size, counted,
so the work done is known), idle again. Throughout, it reads at a fixed short period:

* NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``: mJ since the driver
  loaded), to find its real update interval and take energy as a difference of two reads;
* NVML's power (``nvmlDeviceGetPowerUsage``, mW) and, where the driver has them, the
  instantaneous and averaged power fields of ``nvmlDeviceGetFieldValues``;

and ``nvidia-smi --query-gpu=... -lms 100`` runs beside it, as a tool that samples power would.

Writes in OUT_DIR:
  meta.json          GPU, driver, NVML and CUDA versions, the power limit, each phase's start and
                     end (monotonic and wall seconds), the GEMM size, count and FLOPs
  nvml_samples.csv   t_mono_s, t_wall_s, phase, energy_mj, power_mw (one row per read)
  smi_power.csv      nvidia-smi's CSV as it printed it (timestamp, power.draw, ...)
  counter_updates.csv the reads at which the energy counter changed, with the time since the last
                     change (its update interval)
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

SMI_FIELDS = (
    "timestamp,index,name,power.draw,power.draw.average,power.draw.instant,power.limit,"
    "utilization.gpu,clocks.sm,temperature.gpu"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--idle-s", type=float, default=6.0)
    ap.add_argument("--load-s", type=float, default=12.0)
    ap.add_argument("--period-ms", type=float, default=5.0, help="NVML read period")
    ap.add_argument("--n", type=int, default=8192, help="GEMM size (n x n x n)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import pynvml
    import torch

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(args.gpu)

    def s(v: Any) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    meta: dict[str, Any] = {
        "gpu": s(pynvml.nvmlDeviceGetName(h)),
        "driver": s(pynvml.nvmlSystemGetDriverVersion()),
        "nvml": s(pynvml.nvmlSystemGetNVMLVersion()),
        "cuda_driver": pynvml.nvmlSystemGetCudaDriverVersion(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "power_limit_mw": pynvml.nvmlDeviceGetEnforcedPowerLimit(h),
        "kernel": platform.release(),
        "period_ms": args.period_ms,
        "phases": [],
    }
    rows: list[tuple[float, float, str, int, int]] = []
    phase = ["idle-before"]
    stop = threading.Event()

    def reader() -> None:
        period = args.period_ms / 1000.0
        nxt = time.monotonic()
        while not stop.is_set():
            e = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
            p = pynvml.nvmlDeviceGetPowerUsage(h)
            rows.append((time.monotonic(), time.time(), phase[0], int(e), int(p)))
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    smi_out = (args.out / "smi_power.csv").open("w")
    smi = subprocess.Popen(
        ["nvidia-smi", f"--id={args.gpu}", f"--query-gpu={SMI_FIELDS}", "--format=csv",
         "-lms", "100"],
        stdout=smi_out, stderr=subprocess.STDOUT,
    )
    t = threading.Thread(target=reader, daemon=True)
    t.start()

    def mark(name: str, start: float, start_wall: float, **extra: Any) -> None:
        meta["phases"].append({"name": name, "start_mono_s": start, "end_mono_s": time.monotonic(),
                               "start_wall_s": start_wall, "end_wall_s": time.time(), **extra})

    dev = torch.device("cuda", args.gpu)
    a = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16)
    torch.cuda.synchronize(dev)

    t0, w0 = time.monotonic(), time.time()
    time.sleep(args.idle_s)
    mark("idle-before", t0, w0)

    phase[0] = "load"
    t0, w0 = time.monotonic(), time.time()
    count = 0
    while time.monotonic() - t0 < args.load_s:
        for _ in range(16):
            a @ b
        count += 16
        torch.cuda.synchronize(dev)
    mark("load", t0, w0, gemm_n=args.n, gemm_count=count, dtype="bfloat16",
         flops=2 * args.n**3 * count)

    phase[0] = "idle-after"
    t0, w0 = time.monotonic(), time.time()
    time.sleep(args.idle_s)
    mark("idle-after", t0, w0)

    stop.set()
    t.join()
    smi.terminate()
    smi.wait(timeout=10)
    smi_out.close()

    with (args.out / "nvml_samples.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_mono_s", "t_wall_s", "phase", "energy_mj", "power_mw"])
        for r in rows:
            w.writerow([f"{r[0]:.6f}", f"{r[1]:.6f}", r[2], r[3], r[4]])
    with (args.out / "counter_updates.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_mono_s", "energy_mj", "delta_mj", "since_last_change_ms"])
        last_e, last_t = None, None
        for r in rows:
            if last_e is None or r[3] != last_e:
                since = "" if last_t is None else f"{(r[0] - last_t) * 1000:.1f}"
                w.writerow([f"{r[0]:.6f}", r[3], "" if last_e is None else r[3] - last_e, since])
                last_e, last_t = r[3], r[0]
    meta["samples"] = len(rows)
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    pynvml.nvmlShutdown()
    print(json.dumps({k: meta[k] for k in ("gpu", "driver", "samples")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
