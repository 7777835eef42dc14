"""What one run holds open on the nodes: live ranks and shared connections (and the few facts
of the nodes a run learns once: the server's argument list per image).

A :class:`Registry` is created by whoever drives a run (the plugin's session, a script) and
passed down to the services and backends; nothing of it is a process global. Its
:meth:`close` stops every rank still tracked and closes every connection, so a Ctrl-C, a SIGTERM
or an interpreter exit leaves nothing behind once the owner calls it (the session installs an
``atexit`` safety net with :meth:`install_atexit` and removes it with :meth:`remove_atexit`).

Without a registry the functions of this package use :func:`temporary`: connections then last
for the one call that opened them.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, cast

from pytest_ppsweep.cluster.base import RankHandle

__all__ = ["Registry", "temporary"]


class Closeable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closeable)
T = TypeVar("T")


class Registry:
    """Live rank handles and connection caches (one SSH connection, one docker client per
    node and settings) of one run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranks: set[RankHandle] = set()
        self._conns: dict[Hashable, Closeable] = {}
        self._facts: dict[Hashable, Any] = {}
        self._fact_locks: dict[Hashable, threading.Lock] = {}
        self._atexit = False

    # -- ranks --------------------------------------------------------------------------------

    def track(self, rank: RankHandle) -> None:
        with self._lock:
            self._ranks.add(rank)

    def untrack(self, rank: RankHandle) -> None:
        with self._lock:
            self._ranks.discard(rank)

    @property
    def live(self) -> int:
        """How many started ranks have not been stopped yet."""
        with self._lock:
            return len(self._ranks)

    def stop_ranks(self, grace_s: float = 2.0) -> None:
        """Stop every rank still tracked (Ctrl-C, SIGTERM, interpreter exit)."""
        with self._lock:
            ranks = list(self._ranks)
            self._ranks.clear()

        def one(rank: RankHandle) -> None:
            with contextlib.suppress(Exception):
                rank.stop(grace_s=grace_s)

        if len(ranks) > 1:
            # all at once: the grace periods (and remote round trips) overlap instead of adding up
            pool = ThreadPoolExecutor(max_workers=min(len(ranks), 32))
            try:
                for rank in ranks:
                    pool.submit(one, rank)
                threaded = True
            except RuntimeError:  # at interpreter exit (atexit) no thread may start
                threaded = False
            finally:
                pool.shutdown(wait=True)
            if threaded:
                return
        for rank in ranks:
            one(rank)  # idempotent: a rank a thread already stopped is not stopped again

    # -- connections --------------------------------------------------------------------------

    def shared(self, key: Hashable, connect: Callable[[], C]) -> C:
        """The connection kept under ``key``, made by ``connect`` on first use (one SSH
        connection or one docker client per node and settings: ``ssh.shared_host``,
        ``docker_launcher.shared_client``)."""
        with self._lock:
            found = self._conns.get(key)
        if found is not None:
            return cast(C, found)
        made = connect()  # outside the lock: connecting may take seconds
        with self._lock:
            kept = self._conns.setdefault(key, made)
        if kept is not made:
            with contextlib.suppress(Exception):
                made.close()
        return cast(C, kept)

    def close_connections(self) -> None:
        with self._lock:
            conns = list(self._conns.values())
            self._conns.clear()
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()

    # -- facts learnt once -----------------------------------------------------------------------

    def once(self, key: Hashable, learn: Callable[[], T]) -> T:
        """What ``learn`` answers for ``key``, asked once in this run (a second caller of the
        same key waits for the first's answer): the server's argument list per image."""
        with self._lock:
            if key in self._facts:
                return cast(T, self._facts[key])
            lock = self._fact_locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._facts:
                    return cast(T, self._facts[key])
            fact = learn()
            with self._lock:
                self._facts[key] = fact
            return fact

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every rank still tracked, then close every connection (idempotent)."""
        self.stop_ranks()
        self.close_connections()

    def install_atexit(self) -> None:
        """Safety net: :meth:`close` at interpreter exit, until :meth:`remove_atexit`."""
        if not self._atexit:
            atexit.register(self.close)
            self._atexit = True

    def remove_atexit(self) -> None:
        if self._atexit:
            atexit.unregister(self.close)
            self._atexit = False

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def temporary(registry: Registry | None) -> Iterator[Registry]:
    """``registry`` itself, or a fresh one closed when the block ends."""
    if registry is not None:
        yield registry
        return
    with Registry() as own:
        yield own
