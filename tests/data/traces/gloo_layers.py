"""A small gloo program of "layers" under the torch profiler, one Chrome trace per rank.

Three times a GEMM then an all-reduce (a row-parallel linear), then a send/recv pair between
the two "stages", an all-gather and a barrier. Produced gloo-2ranks/ (then gzip -9):
``~/.cache/pytest-ppsweep/venv-sglang-0.5.23/bin/python gloo_layers.py OUT``.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CPU = torch.profiler.ProfilerActivity.CPU


def main(rank: int, world: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.43.1", MASTER_PORT="42501")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x = torch.randn(64, 256)
    w = torch.randn(256, 256)
    with torch.profiler.profile(activities=[CPU], record_shapes=True, with_stack=False) as prof:
        for _layer in range(3):
            y = x @ w
            dist.all_reduce(y)
        if rank == 0:
            dist.send(y, 1)
        else:
            dist.recv(y, 0)
        dist.all_gather([torch.empty_like(y) for _ in range(world)], y)
        dist.barrier()
    prof.export_chrome_trace(f"{out}/rank{rank}.trace.json")
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(2, sys.argv[1]), nprocs=2)
