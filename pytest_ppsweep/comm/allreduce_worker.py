"""All-reduce microbenchmark worker: one process per node, one rank per GPU (or CPU rank).

SELF-CONTAINED: it needs only torch and the standard library, and it is NOT imported by the
plugin. The plugin copies it to the node (or bind-mounts it into the server's image) and runs it
with the node's python, in the environment of the server (the NCCL_*/GLOO_* variables)::

    python allreduce_worker.py --nnodes 2 --node-rank 0 --nproc-per-node 4 --devices 0,1,2,3 \
        --master-addr 10.0.0.1 --master-port 29600 --sizes 1024,2048,4096 --warmup 5 --iters 20

Every rank joins ``torch.distributed`` through the environment (``MASTER_ADDR``/``MASTER_PORT``
of node 0, ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``); the backend is NCCL when CUDA is there,
gloo otherwise (``--backend`` forces one). First ``--warmup`` all-reduces of the largest size
(as nccl-tests), then for every size (bytes, float32): ``--warmup`` all-reduces, then
``--iters`` timed ones; the time of a size is the mean over iterations,
averaged over the ranks (nccl-tests' default ``-a 1``); ``time_p50_us`` is the median
iteration (CUDA events on the stream, or the clock around each synchronous gloo call), averaged
over the ranks, robust to a preempted iteration on a loaded node; algbw = size / time and
busbw = algbw * 2 (n - 1) / n (nccl-tests' definition for all-reduce). Then a fresh buffer filled
with ``rank + 1`` is all-reduced once and every element is checked against n (n + 1) / 2.

Output: one JSON line per event on stdout, each with ``"ppsweep_comm": 1``:
``start``/``init``/``done`` per rank, ``result`` per size (rank 0 only) and ``error`` with
``kind`` (``init``, ``wrong_sum``, ``hang``, ``exception``), ``rank`` and ``node``.
A rank without progress for ``--timeout-s`` seconds reports ``hang`` with where it was and exits
(bounded wait); the collectives themselves also time out after ``--timeout-s``.

Exit status: 0 ok, 2 wrong sum, 3 init failure, 4 hang, 5 other exception.

Test hook (like the emulator's PPSWEEP_SIM_FAULTS): ``PPSWEEP_COMM_FAULT`` = ``wrong_sum:R``
(rank R corrupts its result), ``hang:R`` (rank R stops before its first all-reduce) or
``init:R`` (rank R dials a rendezvous port nobody listens on).
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import socket
import sys
import threading
import time
from typing import Any

__all__ = ()  # a script shipped to the nodes, not an API of the package

EXIT_WRONG, EXIT_INIT, EXIT_HANG, EXIT_EXC = 2, 3, 4, 5
DTYPE_BYTES = 4  # float32, as nccl-tests' default


def emit(**fields: Any) -> None:
    line = json.dumps({"ppsweep_comm": 1, "t": round(time.time(), 3), **fields})
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Watchdog:
    """Bounded wait inside the worker: no progress for ``timeout_s`` → report and exit."""
    def __init__(self, rank: int, node: str, timeout_s: float) -> None:
        self.rank, self.node, self.timeout_s = rank, node, timeout_s
        self.phase = "starting"
        self.last = time.monotonic()
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def progress(self, phase: str) -> None:
        self.phase = phase
        self.last = time.monotonic()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            idle = time.monotonic() - self.last
            if idle > self.timeout_s:
                kind = "init" if self.phase.startswith("init_process_group") else "hang"
                emit(event="error", kind=kind, rank=self.rank, node=self.node,
                     message=f"no progress for {idle:.0f} s (limit {self.timeout_s:g} s) "
                     f"while {self.phase}")
                os._exit(EXIT_HANG)


def _nccl_version(torch: Any) -> str:
    """2.28.9 (torch returns a tuple, older releases one int such as 22809 or 2809)."""
    v = torch.cuda.nccl.version()
    if isinstance(v, tuple):
        return ".".join(map(str, v))
    v = int(v)
    if v >= 10000:
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    return f"{v // 1000}.{v // 100 % 10}.{v % 100}"


def fault_for(rank: int) -> str:
    spec = os.environ.get("PPSWEEP_COMM_FAULT", "")
    for item in filter(None, (s.strip() for s in spec.split(","))):
        kind, _, who = item.partition(":")
        if who.strip() == str(rank):
            return kind.strip()
    return ""


def rank_main(args: argparse.Namespace, local_rank: int) -> int:
    rank = args.node_rank * args.nproc_per_node + local_rank
    world = args.nnodes * args.nproc_per_node
    names = args.node_names.split(",") if args.node_names else []
    node = names[args.node_rank] if args.node_rank < len(names) else f"node{args.node_rank}"
    fault = fault_for(rank)
    port = args.master_port + (1 if fault == "init" else 0)
    os.environ.update(
        MASTER_ADDR=args.master_addr, MASTER_PORT=str(port), WORLD_SIZE=str(world),
        RANK=str(rank), LOCAL_RANK=str(local_rank),
    )
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
        import torch.distributed as dist  # type: ignore[import-not-found,unused-ignore]
    except Exception as exc:  # the node's python has no usable torch
        emit(event="error", kind="init", rank=rank, node=node, message=f"import torch: {exc}")
        return EXIT_INIT
    # the bounded wait starts once torch is imported (seconds on a loaded node; the plugin's
    # own deadline covers a node that cannot even import it)
    dog = Watchdog(rank, node, args.timeout_s)
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    devices = [int(d) for d in args.devices.split(",")] if args.devices else []
    device = torch.device("cpu")
    if backend == "nccl":
        index = devices[local_rank] if local_rank < len(devices) else local_rank
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    emit(event="start", rank=rank, node=node, host=socket.gethostname(), pid=os.getpid(),
         world_size=world, backend=backend, device=str(device), torch=torch.__version__,
         nccl=_nccl_version(torch) if backend == "nccl" else "")
    dog.progress(f"init_process_group({backend}) with {args.master_addr}:{port}")
    t0 = time.monotonic()
    try:
        dist.init_process_group(backend, init_method="env://", world_size=world, rank=rank,
                                timeout=datetime.timedelta(seconds=args.timeout_s))
    except Exception as exc:
        emit(event="error", kind="init", rank=rank, node=node,
             message=f"init_process_group({backend}) with {args.master_addr}:{port}: "
             f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}")
        dog.stop()
        return EXIT_INIT
    emit(event="init", rank=rank, node=node, seconds=round(time.monotonic() - t0, 3))

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    status = 0
    try:
        if args.sizes and args.warmup:  # as nccl-tests: warm up at the largest size first
            dog.progress(f"warm-up at {max(args.sizes)} B")
            big = torch.zeros(max(args.sizes) // DTYPE_BYTES, dtype=torch.float32, device=device)
            if fault != "hang":
                for _ in range(args.warmup):
                    dist.all_reduce(big)
            sync()
            del big
        for size in args.sizes:
            count = size // DTYPE_BYTES
            buf = torch.zeros(count, dtype=torch.float32, device=device)
            dog.progress(f"size {size} B: warm-up")
            if fault == "hang":
                dog.progress(f"size {size} B: hung before its first all-reduce (fault)")
                threading.Event().wait()
            for _ in range(args.warmup):
                dist.all_reduce(buf)
            sync()
            if device.type == "cuda":  # NCCL: the barrier on this rank's GPU, not a guessed one
                dist.barrier(device_ids=[device.index])
            else:
                dist.barrier()
            dog.progress(f"size {size} B: timed all-reduces")
            marks: list[Any] = []  # per iteration: CUDA events on the stream, or clock stamps
            start = time.perf_counter()
            for _ in range(args.iters):
                if device.type == "cuda":
                    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                        enable_timing=True)
                    begin.record()
                    dist.all_reduce(buf)
                    end.record()
                    marks.append((begin, end))
                else:
                    t_iter = time.perf_counter()
                    dist.all_reduce(buf)  # gloo returns when the collective is done
                    marks.append(time.perf_counter() - t_iter)
            sync()
            seconds = (time.perf_counter() - start) / max(args.iters, 1)
            each = sorted(b.elapsed_time(e) / 1e3 for b, e in marks) if device.type == "cuda" \
                else sorted(marks)
            p50 = each[len(each) // 2] if each else seconds
            dog.progress(f"size {size} B: checking the sum")
            buf.fill_(float(rank + 1))
            dist.all_reduce(buf)
            if fault == "wrong_sum":
                buf[0] += 1.0
            expected = world * (world + 1) / 2
            wrong = int((buf != expected).sum().item())
            mine = torch.tensor([float(wrong), seconds, p50], dtype=torch.float64, device=device)
            every = [torch.zeros_like(mine) for _ in range(world)]
            dist.all_gather(every, mine)
            wrongs = [int(t[0].item()) for t in every]
            mean_s = sum(float(t[1].item()) for t in every) / world
            p50_s = sum(float(t[2].item()) for t in every) / world
            if wrong:
                emit(event="error", kind="wrong_sum", rank=rank, node=node, size_bytes=size,
                     wrong=wrong, message=f"{wrong} of {count} elements differ from "
                     f"{expected:g} after all-reduce of {size} B")
            if rank == 0:
                algbw = size / mean_s / 1e9 if mean_s > 0 else 0.0
                emit(event="result", size_bytes=size, count=count, dtype="float32",
                     warmup=args.warmup, iters=args.iters, world_size=world, backend=backend,
                     time_us=round(mean_s * 1e6, 3), time_p50_us=round(p50_s * 1e6, 3),
                     algbw_gbs=round(algbw, 4),
                     busbw_gbs=round(algbw * 2 * (world - 1) / world, 4),
                     wrong=sum(wrongs), wrong_ranks=[r for r, w in enumerate(wrongs) if w])
            if any(wrongs):
                status = EXIT_WRONG
                break
        dog.progress("destroy_process_group")
        dist.destroy_process_group()
    except Exception as exc:
        emit(event="error", kind="exception", rank=rank, node=node,
             message=f"{dog.phase}: {type(exc).__name__}: "
             f"{str(exc).strip().splitlines()[0] if str(exc) else ''}")
        dog.stop()
        return EXIT_EXC
    dog.stop()
    emit(event="done", rank=rank, node=node, status=status)
    return status


def _child(args: argparse.Namespace, local_rank: int) -> None:
    sys.exit(rank_main(args, local_rank))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nnodes", type=int, default=int(os.environ.get("PPSWEEP_COMM_NNODES", 1)))
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--nproc-per-node", type=int, default=1)
    p.add_argument("--devices", default="", help="GPU indices of this node's ranks, 0,1,...")
    p.add_argument("--node-names", default="", help="names of the nodes, comma-separated")
    p.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR", "127.0.0.1"))
    p.add_argument("--master-port", type=int, default=int(os.environ.get("MASTER_PORT", 29600)))
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",") if x],
                   default=[1024 << i for i in range(19)], help="bytes, comma-separated")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--timeout-s", type=float, default=300.0)
    args = p.parse_args(argv)
    bad = [s for s in args.sizes if s < DTYPE_BYTES or s % DTYPE_BYTES]
    if bad:
        p.error(f"--sizes: {bad} are not multiples of {DTYPE_BYTES} bytes (float32)")
    if args.nproc_per_node == 1:
        return rank_main(args, 0)

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_child, args=(args, i)) for i in range(args.nproc_per_node)]
    for proc in procs:
        proc.start()
    status = 0
    deadline = time.monotonic() + args.timeout_s * (2 + len(args.sizes))
    while any(proc.is_alive() for proc in procs):
        failed = [proc for proc in procs if proc.exitcode not in (None, 0)]
        if failed or time.monotonic() > deadline:
            status = (failed[0].exitcode or EXIT_EXC) if failed else EXIT_HANG
            time.sleep(1.0)  # let the other ranks report their side before they are stopped
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()
            break
        time.sleep(0.1)
    for proc in procs:
        proc.join(10)
        if proc.exitcode:
            status = status or proc.exitcode
    return status if status >= 0 else EXIT_EXC


if __name__ == "__main__":
    sys.exit(main())
