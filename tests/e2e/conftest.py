"""Fixtures of the end-to-end runs (support/sweepdirs.py; the emulator's: simfixtures.py)."""

from support.simfixtures import cluster, state_dir
from support.sweepdirs import no_leftover_ranks, ports, sweep_dir

__all__ = ["cluster", "no_leftover_ranks", "ports", "state_dir", "sweep_dir"]
