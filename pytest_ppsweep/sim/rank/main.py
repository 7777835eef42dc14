"""One rank from start to exit: boot (sim/rank/bootseq.py), then serve (sim/rank/serve.py).

This is the top of the rank layer: it joins the boot sequence and the serving phase, which share
only sim/rank/phases.py, and runs them in a :class:`~.node.RankProcess` (signals, peers, exit
code), which knows neither.
"""

from __future__ import annotations

import asyncio

from ..launch.config import SimConfig
from .bootseq import boot
from .node import RankProcess
from .serve import serve_follower, serve_rank0


async def boot_and_serve(rp: RankProcess) -> None:
    """Boot this rank, then serve (rank 0) or stand by with the dummy health server."""
    phases = await boot(rp)
    if phases is None:
        return
    if rp.rank == 0:
        await serve_rank0(rp, phases)
    else:
        await serve_follower(rp)


def run_rank(cfg: SimConfig) -> int:
    """Run one rank of ``cfg`` in a fresh event loop; returns the process exit code."""
    return asyncio.run(RankProcess(cfg).run(boot_and_serve))
