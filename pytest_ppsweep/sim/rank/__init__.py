"""Layer 4 of the emulator, the rank: one node-rank process from start to exit.

Its life cycle, signals and peers (node), the TCP rendezvous between ranks (rendezvous), the
emulated phase clock (phases), SGLang's start-up sequence (bootseq), the serving phase (serve),
and the two joined in one run (main: :func:`run_rank`, what ``python3 -m pytest_ppsweep.sim``
calls). :class:`LocalCluster` starts such processes on loopback addresses for tests and
benchmarks. Within the layer: node → phases → bootseq, serve → main; node imports neither the
boot sequence nor the serving phase.

Layers: ``model`` → ``launch`` → ``http`` → ``rank``; each imports only the layers before it
(tests/test_layering_sim.py checks this).
"""

from __future__ import annotations

from .bootseq import banner, boot
from .handover import Phases, hang_seconds, pid
from .localcluster import LocalCluster
from .main import boot_and_serve, run_rank
from .node import RankProcess
from .rendezvous import RendezvousClient, RendezvousServer, split_addr
from .serve import serve_follower, serve_rank0

__all__ = [
    "LocalCluster",
    "Phases",
    "RankProcess",
    "RendezvousClient",
    "RendezvousServer",
    "banner",
    "boot",
    "boot_and_serve",
    "hang_seconds",
    "pid",
    "run_rank",
    "serve_follower",
    "serve_rank0",
    "split_addr",
]
