"""Fixtures of the emulator tests (support/simfixtures.py)."""

from support.simfixtures import cluster, state_dir

__all__ = ["cluster", "state_dir"]
