"""One rank from start to exit: boot (sim/rank/bootseq.py), then serve (sim/rank/serve.py).

This is the top of the rank layer: it joins the boot sequence and the serving phase, which share
only sim/rank/handover.py, and runs them in a :class:`~.node.RankProcess` (signals, peers, exit
code), which knows neither.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

from ..launch.config import SimConfig
from .bootseq import boot
from .node import RankProcess
from .serve import serve_follower, serve_rank0


async def boot_and_serve(rp: RankProcess) -> None:
    """Boot this rank, then serve (rank 0) or stand by with the dummy health server."""
    if rp.faults.get("escape_child", rp.rank) is not None:
        # a daemon-like child in a session of its own; it inherits the rank's environment
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
        rp.log.line(f"started a helper process in its own session (pid {child.pid})")
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
