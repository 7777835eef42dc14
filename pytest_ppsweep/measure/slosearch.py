"""The probe policy of the SLO search: which load to try next on a booted layout, when to stop,
and what the probes say. Pure: no server, no clock (the run layer measures each probe).

The search keeps a bracket: ``low``, the highest load found within the SLO, and ``high``, the
lowest load found outside it. It probes ``min`` first (nothing within: the answer is "below
min"), then ``max`` (within: "at least max"), then bisects: the arithmetic midpoint, or the
geometric one while ``high / low ≥ 4`` (a wide rate range halves in log space, as a load
sweep's decades do); integer loads (concurrency) round the midpoint down. It stops when
``high − low ≤ precision`` or after ``max_probes`` probes (the stated budget).

Then the final load is repeated as the seeds repeat: ``repeats`` rounds in all (its probe is the
first). A repeat outside the SLO makes that load the bracket's new ``high`` and the search goes
on below it while probes remain; when none remain the outcome says the low end was not
confirmed. So the budget is at most ``max_probes`` probes plus ``repeats − 1`` repeats per
confirmation tried.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["Probe", "Search", "SearchOutcome", "load_text"]

GEOMETRIC_RATIO = 4.0


@dataclass(frozen=True)
class Probe:
    """One measured round of the search: its load, phase (``search``, ``repeat`` at the low end
    or ``confirm`` at the high end), verdict."""

    load: float
    phase: str
    within: bool


def load_text(load: float, integer: bool) -> str:
    """A load as the search states it (``2.4``, ``16``)."""
    return f"{int(load)}" if integer else f"{load:.3g}"


@dataclass(frozen=True)
class SearchOutcome:
    """What the probes established about the highest load within the SLO."""

    low: float | None  # highest load within the SLO (every repeat within when confirmed)
    high: float | None  # lowest load outside it; None: every probe up to max was within
    min_load: float
    max_load: float
    precision: float
    probes: int  # search probes spent
    max_probes: int
    repeats: int  # rounds at ``low`` within the SLO
    repeats_wanted: int
    integer: bool
    unit: str
    high_outside: int = 0  # rounds at ``high`` outside the SLO (the search's and its confirm)
    high_rounds: int = 0  # rounds at ``high``

    @property
    def high_confirmed(self) -> bool:
        """The high end held on its confirm round too (every round at it outside)."""
        return self.high is not None and self.high_rounds >= 2 and (
            self.high_outside == self.high_rounds)

    @property
    def confirmed(self) -> bool:
        return self.low is not None and self.repeats >= self.repeats_wanted

    @property
    def precise(self) -> bool:
        """The bracket is as narrow as asked (or open above ``max``: nothing left to find)."""
        if self.low is None:
            return self.high is not None and self.high <= self.min_load
        return self.high is None or self.high - self.low <= self.precision + 1e-12

    @property
    def status(self) -> str:
        if self.low is None:
            return "below min" if self.high is not None and self.high <= self.min_load else (
                "no probe within")
        if self.high is None:
            return "at least max"
        return "bracketed" if self.precise else "budget spent"

    def text(self) -> str:
        """The stated answer: ``≥ 2.4 req/s and < 2.6 req/s (6 of 8 probes, 3 repeats)``."""
        def fmt(value: float) -> str:
            return load_text(value, self.integer)

        if self.low is None:
            found = f"< {fmt(self.min_load)} {self.unit} (none within the SLO from the minimum)"
        elif self.high is None:
            found = f"≥ {fmt(self.low)} {self.unit} (the maximum searched)"
        else:
            found = f"≥ {fmt(self.low)} {self.unit} and < {fmt(self.high)} {self.unit}"
        budget = (f"{self.probes} of {self.max_probes} probes, precision "
                  f"{fmt(self.precision)} {self.unit}")
        if self.low is not None:
            budget += f", {self.repeats}/{self.repeats_wanted} repeats within"
        if self.high is not None and self.high_rounds >= 2:
            budget += f", upper end {self.high_outside}/{self.high_rounds} outside"
        if self.status == "budget spent":
            budget += "; probe budget spent before the precision"
        return f"{found} ({budget})"


# The phase a search keeps the minimum's unproven first probe under: spent, but neither an end
# of the bracket nor a repeat of one.
UNPROVEN = "unproven"


@dataclass
class Search:
    """The search state. ``next()`` gives the load and phase to measure (None: done), and
    ``record(load, within)`` adds its verdict."""

    min_load: float
    max_load: float
    precision: float
    max_probes: int
    repeats: int = 3
    integer: bool = False
    unit: str = "req/s"
    probes: list[Probe] = field(default_factory=list)
    _low: float | None = None
    _high: float | None = None
    _pending: tuple[float, str] | None = None
    # the minimum's first probe neither proved the SLO met nor missed (unproven: too few
    # requests to tell, e.g. one stalled request of the few of a first probe): it is measured
    # once more before "none within from the minimum" is concluded
    _min_again: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.min_load < self.max_load or not self.precision > 0:
            raise ValueError(f"need 0 < min < max and precision > 0: {self.min_load}, "
                             f"{self.max_load}, {self.precision}")
        if self.max_probes < 2 or self.repeats < 1:
            raise ValueError(f"need max_probes ≥ 2 and repeats ≥ 1: {self.max_probes}, "
                             f"{self.repeats}")

    @property
    def spent(self) -> int:
        """Search probes so far (the minimum's unproven first probe counts: it was spent)."""
        return sum(p.phase in ("search", UNPROVEN) for p in self.probes)

    def _repeats_at(self, load: float) -> tuple[int, int]:
        """Rounds at ``load`` since it became the low end: (within, total)."""
        at = [p for p in self.probes if p.load == load and p.phase != UNPROVEN]
        return sum(p.within for p in at), len(at)

    def _midpoint(self, low: float, high: float) -> float:
        mid = math.sqrt(low * high) if high / low >= GEOMETRIC_RATIO else (low + high) / 2
        return float(math.floor(mid)) if self.integer else mid

    def _bracketed(self) -> bool:
        return self._low is not None and self._high is not None and (
            self._high - self._low <= self.precision + 1e-12)

    def next(self) -> tuple[float, str] | None:
        """The next (load, phase) to measure, or None when the search is over."""
        if self._pending is not None:
            return self._pending
        spent = self.spent
        at_min = all(p.load == self.min_load for p in self.probes)
        if spent == 0 or (self._min_again and spent == 1):
            step: tuple[float, str] | None = (self.min_load, "search")
        elif self._low is None:
            step = None  # min itself was outside the SLO
        elif at_min and self._high is None:
            step = (self.max_load, "search")
        elif self._high is not None and not self._bracketed() and spent < self.max_probes:
            mid = self._midpoint(self._low, self._high)
            step = (mid, "search") if self._low < mid < self._high else None
            if step is None:
                step = self._repeat()
        else:
            step = self._repeat()
        self._pending = step
        return step

    def _repeat(self) -> tuple[float, str] | None:
        if self._low is None:
            return None
        within, total = self._repeats_at(self._low)
        if total < self.repeats and within == total:
            return (self._low, "repeat")
        if within == total and self._high is not None:
            # both ends confirmed: the high end, one search probe so far, measured once more
            at_high = [p for p in self.probes if p.load == self._high]
            if len(at_high) == 1:
                return (self._high, "confirm")
        return None

    def record(self, load: float, within: bool, unproven: bool = False) -> None:
        """The verdict of the round asked by the last ``next()``; ``unproven``: outside only
        because its requests could not prove the SLO either way (measure/withinslo.py). The
        minimum's first probe unproven is measured once more (:attr:`_min_again`), its verdict
        not yet the bracket's."""
        if self._pending is None or self._pending[0] != load:
            raise ValueError(f"load {load} was not asked (pending: {self._pending})")
        phase = self._pending[1]
        self._pending = None
        first_at_min = (phase == "search" and load == self.min_load and not self.probes)
        if first_at_min and not within and unproven:
            self.probes.append(Probe(load, UNPROVEN, within))
            self._min_again = True
            return
        self.probes.append(Probe(load, phase, within))
        if phase == "confirm":
            return  # the bracket stands; the outcome says whether its high end held
        if within and phase == "search" and (self._low is None or load > self._low):
            self._low = load
        elif not within:
            if self._high is None or load < self._high:
                self._high = load
            if phase == "repeat":  # not sustained: the bracket moves below it
                below = [p.load for p in self.probes if p.within and p.load < load
                         and all(q.within for q in self.probes
                                 if q.load == p.load and q.phase != UNPROVEN)]
                self._low = max(below) if below else None

    def outcome(self) -> SearchOutcome:
        within = total = 0
        if self._low is not None:
            within, total = self._repeats_at(self._low)
        return SearchOutcome(
            low=self._low, high=self._high, min_load=self.min_load, max_load=self.max_load,
            precision=self.precision, probes=self.spent, max_probes=self.max_probes,
            repeats=within if within == total else 0, repeats_wanted=self.repeats,
            integer=self.integer, unit=self.unit,
            high_outside=sum(not p.within for p in self.probes if p.load == self._high),
            high_rounds=sum(p.load == self._high for p in self.probes))
