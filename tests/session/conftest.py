"""Fixtures of the session's tests that run pytest on a sweep (support/sweepdirs.py)."""

from support.sweepdirs import no_leftover_ranks, ports

__all__ = ["no_leftover_ranks", "ports"]
