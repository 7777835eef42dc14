"""The emulator's all-reduce microbenchmark: ``python3 -m pytest_ppsweep.sim.comm [worker args]``.

A drop-in for the plugin's torch worker (``pytest_ppsweep/comm/allreduce_worker.py``) on an
emulated cluster: it takes the same arguments and prints the same JSON lines, but answers from
the profile (``PPSWEEP_SIM_PROFILE``) instead of moving bytes: the time of a size is the cost
model's ring all-reduce, ``2 (n-1) * ar_step_latency + 2 (n-1)/n * bytes / busbw(domain)``, with
the domain's bus bandwidth from ``[network]`` (PCIe island, one node, several nodes) as
sim/model/costmodel.py uses it for every layer's all-reduce; algbw and busbw follow nccl-tests'
definitions. Every assumption is the profile's, with its source there (seeds §9.2).

Node rank 0 prints a ``result`` line per size; every node prints ``start``/``init``/``done``.
``PPSWEEP_COMM_FAULT`` (``wrong_sum:R``, ``hang:R``, ``init:R``) makes the rank of that global
rank report the failure as the real worker would (exit 2, 4, 3).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from .model.costmodel import allreduce_s, domain_of
from .model.profile import DEFAULT_PROFILE, load_profile

EXIT_WRONG, EXIT_INIT, EXIT_HANG = 2, 3, 4
_FAULT_EXIT = {"wrong_sum": EXIT_WRONG, "init": EXIT_INIT, "hang": EXIT_HANG}


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps({"ppsweep_comm": 1, "t": round(time.time(), 3), **fields}) + "\n")
    sys.stdout.flush()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pytest_ppsweep.sim.comm")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--nproc-per-node", type=int, default=1)
    p.add_argument("--devices", default="")
    p.add_argument("--node-names", default="")
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29600)
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",") if x],
                   default=[1024 << i for i in range(19)])
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--backend", default="auto")
    p.add_argument("--timeout-s", type=float, default=300.0)
    return p.parse_args(argv)


def _faults(world: int) -> dict[int, str]:
    out: dict[int, str] = {}
    for item in filter(None, os.environ.get("PPSWEEP_COMM_FAULT", "").split(",")):
        kind, _, who = item.partition(":")
        if who.strip().isdigit() and int(who) < world:
            out[int(who)] = kind.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    profile = load_profile(os.environ.get("PPSWEEP_SIM_PROFILE") or DEFAULT_PROFILE)
    world = args.nnodes * args.nproc_per_node
    names = args.node_names.split(",") if args.node_names else []
    node = names[args.node_rank] if args.node_rank < len(names) else f"node{args.node_rank}"
    first = args.node_rank * args.nproc_per_node
    mine = range(first, first + args.nproc_per_node)
    level, nodes = domain_of(world, profile)
    for rank in mine:
        emit(event="start", rank=rank, node=node, world_size=world, backend="nccl",
             device=f"cuda:{rank - first}", simulated=True, profile=profile.name,
             domain=level, domain_nodes=nodes)
    faults = _faults(world)
    for rank, kind in sorted(faults.items()):
        if rank in mine and kind in _FAULT_EXIT:
            message = {
                "wrong_sum": "1 element differs from the expected sum after all-reduce "
                f"of {args.sizes[0]} B (injected)",
                "init": f"init_process_group(nccl) with {args.master_addr}:"
                f"{args.master_port + 1}: no rendezvous (injected)",
                "hang": f"no progress for {args.timeout_s:g} s while size {args.sizes[0]} B: "
                "timed all-reduces (injected)",
            }[kind]
            emit(event="error", kind=kind, rank=rank, node=node, message=message)
            return _FAULT_EXIT[kind]
    if faults:  # another node's rank fails: this one sees the collective time out
        emit(event="error", kind="exception", rank=first, node=node,
             message="peer failed: collective timed out")
        return 5
    for rank in mine:
        emit(event="init", rank=rank, node=node, seconds=0.0)
    if args.node_rank == 0:
        for size in args.sizes:
            seconds = allreduce_s(size, world, profile)
            algbw = size / seconds / 1e9 if seconds > 0 else 0.0
            emit(event="result", size_bytes=size, count=size // 4, dtype="float32",
                 warmup=args.warmup, iters=args.iters, world_size=world, backend="nccl",
                 time_us=round(seconds * 1e6, 3), time_p50_us=round(seconds * 1e6, 3),
                 algbw_gbs=round(algbw, 4),
                 busbw_gbs=round(algbw * 2 * (world - 1) / world, 4) if world > 1 else 0.0,
                 wrong=0, wrong_ranks=[], simulated=True)
    for rank in mine:
        emit(event="done", rank=rank, node=node, status=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
