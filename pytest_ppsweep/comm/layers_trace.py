"""A small torch program of "layers" under the torch profiler, one Chrome trace per rank (NCCL).

SELF-CONTAINED like ``allreduce_worker.py``: torch and the standard library only, NOT imported by
the plugin. It makes the real GPU traces of the attribution parser's tests
(``tests/data/h200-1gpu/``, later ``tests/data/nccl-h200/``; ``tools/capture_nccl_h200.sh`` runs
it). One step, on every rank (rank r on GPU r):

* ``--layers`` times a row-parallel linear: ``y = x @ w`` (a bf16 GEMM, [tokens, k] × [k, hidden])
  then ``all_reduce(y)`` started asynchronously, while an independent GEMM of the same shape
  (``x @ w2``, the next layer's column-parallel part) runs on the compute stream: the
  all-reduce can overlap it; then the rank waits for the all-reduce;
* then a send/recv pair between "stages": ``batch_isend_irecv`` sending the activation to rank
  ``r + 1`` and receiving from ``r - 1`` (mod world: a ring shift; at world size 1 a rank's
  send to itself, which NCCL supports).

``--warmup`` steps run first (NCCL's communicator, cuBLAS' handles), then ``--steps`` steps under
``torch.profiler.profile(activities=[CPU, CUDA])``; each rank writes
``<out>/layers-w<world>-TP-<rank>.trace.json.gz`` (gzip) and
``<out>/layers-w<world>-TP-<rank>.summary.json`` (versions, shapes, what the send/recv did, and
the profiler's own per-kernel count and device time, ``key_averages()``: an independent count
for the tests); every rank checks the all-reduce's sum once after the profile. One process per GPU::

    python3 layers_trace.py --world 8 --out OUT          # mp.spawn, ranks 0-7 on GPUs 0-7
    torchrun --nproc-per-node 8 layers_trace.py --out OUT  # or under torchrun (its env)

``--cpu`` runs the same program on gloo (float32, CPU activity only): its multi-process path,
checked without GPUs (``--cpu --world 2`` and under ``torchrun --nproc-per-node 2`` with the
CPU torch 2.13 of the provisioned SGLang venv).

NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``,
``NVSHMEM_DISABLE_NVLS=1`` are set before torch is imported, unless already set).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import shutil
import sys
import time
from typing import Any

__all__ = ()  # a script run on GPU hosts, not an API of the package

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}


def _nccl_version(torch: Any) -> str:
    v = torch.cuda.nccl.version()
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def _kernel_table(prof: Any) -> list[dict[str, Any]]:
    """The profiler's own per-kernel aggregate: name, count, device time (µs)."""
    rows = []
    for evt in prof.key_averages():
        device = str(getattr(evt, "device_type", ""))
        if "CUDA" not in device:
            continue
        total: Any = getattr(evt, "device_time_total", None)
        if total is None:
            total = getattr(evt, "cuda_time_total", 0.0)
        rows.append({"name": evt.key, "count": int(evt.count), "device_time_us": float(total)})
    return sorted(rows, key=lambda r: -r["device_time_us"])


def rank_main(rank: int, world: int, args: argparse.Namespace) -> int:
    for key, value in NO_MULTICAST.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_ADDR", args.master_addr)
    os.environ.setdefault("MASTER_PORT", str(args.master_port))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    import torch  # type: ignore[import-not-found,unused-ignore]
    import torch.distributed as dist  # type: ignore[import-not-found,unused-ignore]

    timeout = datetime.timedelta(seconds=args.timeout_s)
    if args.cpu:  # the same program on gloo (checks its multi-process path without GPUs)
        device, dtype = torch.device("cpu"), torch.float32
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
    else:
        device, dtype = torch.device("cuda", rank), torch.bfloat16
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device,
                                timeout=timeout)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    gen = torch.Generator(device=device).manual_seed(1234 + rank)
    tokens, k, hidden = args.tokens, args.k, args.hidden
    x = torch.randn(tokens, k, device=device, dtype=dtype, generator=gen)
    ws = [torch.randn(k, hidden, device=device, dtype=dtype, generator=gen) / k ** 0.5
          for _ in range(args.layers)]
    w2 = torch.randn(k, hidden, device=device, dtype=dtype, generator=gen) / k ** 0.5
    recv = torch.empty(tokens, hidden, device=device, dtype=dtype)
    p2p: list[str] = []  # what the send/recv pair did (an exception's text if it failed)

    def step() -> None:
        y = x
        for w in ws:
            y = x @ w  # row-parallel linear: the partial sums of this rank
            work = dist.all_reduce(y, async_op=True)
            _ = x @ w2  # independent compute the all-reduce may overlap
            work.wait()
        if p2p and p2p[0] != "ok":
            return
        try:
            ops = [dist.P2POp(dist.isend, y, (rank + 1) % world),
                   dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
            if not p2p:
                p2p.append("ok")
        except Exception as exc:  # recorded in the summary: what NCCL/torch did here
            p2p.append(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}")

    for _ in range(args.warmup):
        step()
    sync()
    if device.type == "cuda":
        dist.barrier(device_ids=[rank])
    else:
        dist.barrier()
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    t0 = time.perf_counter()
    with torch.profiler.profile(activities=acts, record_shapes=False, with_stack=False) as prof:
        for _ in range(args.steps):
            step()
        sync()
    seconds = time.perf_counter() - t0
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"layers-w{world}-TP-{rank}.trace.json")
    prof.export_chrome_trace(stem)
    with open(stem, "rb") as src, gzip.open(stem + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.unlink(stem)
    # the sum, once: every rank contributes rank + 1
    check = torch.full((1024,), float(rank + 1), device=device, dtype=torch.float32)
    dist.all_reduce(check)
    wrong = int((check != world * (world + 1) / 2).sum().item())
    summary = {
        "rank": rank, "world_size": world, "layers": args.layers, "steps": args.steps,
        "warmup": args.warmup, "shapes": {"x": [tokens, k], "w": [k, hidden], "dtype": str(dtype)},
        "all_reduce_bytes": tokens * hidden * (2 if dtype == torch.bfloat16 else 4),
        "backend": dist.get_backend(), "profiled_s": round(seconds, 6),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "nccl": _nccl_version(torch) if device.type == "cuda" else "",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "send_recv": p2p[0] if p2p else "",
        "wrong_sum_elements": wrong, "kernels": _kernel_table(prof),
        "env": {key: os.environ.get(key, "") for key in sorted(NO_MULTICAST)},
    }
    with open(os.path.join(args.out, f"layers-w{world}-TP-{rank}.summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print(json.dumps({"rank": rank, "world": world, "wrong": wrong, "send_recv": p2p[:1],
                      "kernels": len(summary["kernels"])}),
          flush=True)
    dist.destroy_process_group()
    return 2 if wrong else 0


def _child(rank: int, world: int, args: argparse.Namespace) -> None:
    status = rank_main(rank, world, args)
    if status:
        sys.exit(status)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=0,
                   help="ranks (one per GPU) to spawn; default: torchrun's WORLD_SIZE, else 1")
    p.add_argument("--out", required=True, help="folder of the traces")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=8192)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29650)
    p.add_argument("--timeout-s", type=float, default=120.0, help="of every collective")
    p.add_argument("--cpu", action="store_true",
                   help="gloo on CPU, float32, CPU activity only (a check without GPUs)")
    args = p.parse_args(argv)
    if "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ and not args.world:  # torchrun
        return rank_main(int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"]), args)
    world = args.world or 1
    if world == 1:
        return rank_main(0, 1, args)
    import torch.multiprocessing as mp  # type: ignore[import-not-found,unused-ignore]

    mp.spawn(_child, args=(world, args), nprocs=world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
