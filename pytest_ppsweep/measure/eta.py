"""Where a sweep stands and when it will end: ``layout 3/5`` (``boot 2/4, point 3/8`` where
points share a boot: the workloads of one server configuration) and an ETA from the boots and
the rounds measured so far in this run (real seconds; a layout reused or already done costs none
and is counted apart: ``(2 reused)``).

The ETA is the remaining boots times the mean boot so far, plus the remaining rounds times the
mean round so far, minus what the running boot or round has already taken. Until one boot and
one round are measured there is nothing to extrapolate from, and no ETA is shown (never a
guess presented as a measurement).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

__all__ = ["SweepClock", "duration"]


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2.3 h``."""
    if seconds < 60:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class SweepClock:
    """The layouts this process will boot, in order, with the rounds each will run."""

    def __init__(self, rounds: Mapping[str, int], clock: Callable[[], float] = time.monotonic,
                 groups: Mapping[str, str] | None = None, reused: int = 0,
                 boots: int = 1) -> None:
        """``groups``: each layout → the layout whose boot it runs on (one boot per server
        configuration, ``matrix.model.boot_groups``); absent: each layout boots. The points
        run boot by boot (session/collection.keep_boots_together), so they are counted in that
        order. ``reused``: the selected points this process does not run (reused from another
        run, or done before a resume). ``boots``: each server configuration's boots
        ([sweep] boots; ``rounds`` counts the rounds of all of them), every one's first boot
        before any second."""
        self.groups = dict(groups or {})
        self.boots_each = max(1, boots)
        self._made: dict[str, int] = {}  # server configuration → its boots so far
        self._last: str | None = None  # the server configuration booted last (up, or was)
        first: dict[str, int] = {}
        for i, x in enumerate(rounds):
            first.setdefault(self.groups.get(x, x), i)
        self.order: list[str] = sorted(rounds, key=lambda x: first[self.groups.get(x) or x])
        self.boot_order: list[str] = list(dict.fromkeys(self.groups.get(x, x)
                                                        for x in self.order))
        self.reused = reused
        self._booted_groups: set[str] = set()
        self.rounds = dict(rounds)
        self.clock = clock
        self.boots: list[float] = []
        self.round_s: list[float] = []
        self.booted: set[str] = set()
        self.rounds_done: dict[str, int] = {}
        self._since: float | None = None  # when the running boot or round started

    def position(self, layout: str) -> str:
        """``layout 3/5`` (the layout's place among those this process boots), or ``boot 2/4,
        point 3/8`` when points share boots; ``(2 reused)`` after it when points were reused."""
        if layout not in self.order:
            return ""
        kept = f" ({self.reused} reused)" if self.reused else ""
        point = f"{self.order.index(layout) + 1}/{len(self.order)}"
        if len(self.boot_order) == len(self.order):
            return f"layout {point}{kept}{self._round(layout)}"
        boot = self.boot_order.index(self.groups.get(layout, layout)) + 1
        return f"boot {boot}/{len(self.boot_order)}, point {point}{kept}{self._round(layout)}"

    def _round(self, layout: str) -> str:
        """``, boot 2/3``: which of the layout's boots ([sweep] boots > 1) it is at."""
        if self.boots_each == 1:
            return ""
        group = self.groups.get(layout, layout)
        made = self._made.get(group, 0)
        now = made if group == self._last else made + 1
        return f", boot {min(max(now, 1), self.boots_each)}/{self.boots_each}"

    def begin(self) -> None:
        """A boot or a round starts now."""
        self._since = self.clock()

    def boot_done(self, layout: str, seconds: float) -> None:
        self.boots.append(seconds)
        self.booted.add(layout)
        group = self.groups.get(layout, layout)
        self._booted_groups.add(group)
        self._made[group] = self._made.get(group, 0) + 1
        self._last = group
        self._since = None

    def round_done(self, layout: str, seconds: float) -> None:
        self.round_s.append(seconds)
        self.rounds_done[layout] = self.rounds_done.get(layout, 0) + 1
        self._since = None

    def skipped(self, layout: str) -> None:
        """A layout that will not boot (reused, done, failed to boot): nothing left of it."""
        self.booted.add(layout)
        self.rounds_done[layout] = self.rounds.get(layout, 0)
        self._made[self.groups.get(layout, layout)] = self.boots_each  # no later boot either

    def eta_s(self) -> float | None:
        """Seconds until the last layout is done, or None before a boot and a round were
        measured."""
        if not self.boots or not self.round_s:
            return None
        if self.boots_each == 1:
            boots_left = len({self.groups.get(x, x) for x in self.order if x not in self.booted
                              and self.groups.get(x, x) not in self._booted_groups})
        else:
            boots_left = sum(max(self.boots_each - self._made.get(g, 0), 0)
                             for g in self.boot_order)
        rounds_left = sum(max(self.rounds[x] - self.rounds_done.get(x, 0), 0) for x in self.order)
        left = (boots_left * statistics.mean(self.boots)
                + rounds_left * statistics.mean(self.round_s))
        if self._since is not None:
            left -= self.clock() - self._since
        return max(left, 0.0)

    def layout_s(self, layout: str) -> float | None:
        """Seconds ``layout`` will take from now (its boot unless its server configuration is
        up, then its rounds left), or None before a boot and a round were measured: what a
        Slurm allocation's time left is compared with before the layout starts."""
        if not self.boots or not self.round_s:
            return None
        group = self.groups.get(layout, layout)
        if self.boots_each > 1:  # this boot of it only: the next boot is another layout's turn
            each = self.rounds.get(layout, 0) / self.boots_each
            if group == self._last:
                done = self.rounds_done.get(layout, 0) - (self._made.get(group, 1) - 1) * each
                return max(each - done, 0.0) * statistics.mean(self.round_s)
            return statistics.mean(self.boots) + each * statistics.mean(self.round_s)
        boot = 0.0 if layout in self.booted or group in self._booted_groups else (
            statistics.mean(self.boots))
        rounds = max(self.rounds.get(layout, 0) - self.rounds_done.get(layout, 0), 0)
        return boot + rounds * statistics.mean(self.round_s)

    def describe(self, layout: str) -> str:
        """``layout 3/5, ETA 12 min`` (no ETA before one boot and one round)."""
        eta = self.eta_s()
        where = self.position(layout)
        return where + (f", ETA {duration(eta)}" if eta is not None and where else "")

