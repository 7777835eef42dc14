"""The SLO search's capacity estimate wired to the run: the search that refines it
(:class:`CapacitySearch`) and slo_probes.csv's ``over_limit`` counts it is fitted from. The
statistics (the logistic fit, Fieller's interval, the ratio of two capacities) are
stats/capacity.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from pytest_ppsweep.matrix.slospec import percentile_of
from pytest_ppsweep.measure.slosearch import Probe, Search
from pytest_ppsweep.stats.capacity import Capacity, Share, binding, next_load

__all__ = ["MIN_REFINE", "CapacitySearch", "capped", "limits_of", "of_probes", "over_cell",
           "parse_over", "shares_of"]

MIN_REFINE = 2  # refine probes before the interval may stop it: one on each side of the estimate


def over_cell(over: Mapping[str, tuple[int, int]]) -> str:
    """slo_probes.csv's ``over_limit`` cell: per percentile limit, requests over it of those
    judged (``ttft_p50_s=12/160``; ``;`` between limits); :func:`parse_over` reads it back."""
    return ";".join(f"{key}={k}/{n}" for key, (k, n) in dict(over).items())


def parse_over(cell: str | None) -> dict[str, tuple[int, int]]:
    """slo_probes.csv's ``over_limit`` cell read back (``ttft_p50_s=12/160;e2e_p99_s=0/160``:
    per percentile limit, requests over it of those judged); empty for a row written before
    the column existed."""
    out: dict[str, tuple[int, int]] = {}
    for part in (cell or "").split(";"):
        key, _, counts = part.partition("=")
        k, _, n = counts.partition("/")
        if key and k.isdigit() and n.isdigit():
            out[key] = (int(k), int(n))
    return out


def shares_of(rows: Sequence[Mapping[str, str]]) -> dict[str, list[Share]]:
    """Per percentile limit's key, the shares of slo_probes.csv ``rows`` (one layout's, every
    phase: the search fits them all), in probe order."""
    out: dict[str, list[Share]] = {}
    for row in sorted(rows, key=lambda r: int(r.get("probe") or 0)):
        try:
            load = float(row["load"])
        except (KeyError, TypeError, ValueError):
            continue
        for key, (k, n) in parse_over(row.get("over_limit")).items():
            out.setdefault(key, []).append(Share(load, k, n))
    return out


def limits_of(keys: Sequence[str]) -> dict[str, float]:
    """key → allowance (``1 − q/100``) of the percentile limits among ``keys``."""
    return {key: 1.0 - q / 100.0 for key in keys if (q := percentile_of(key)) is not None}


def capped(cap: Capacity | None, ceiling: float | None) -> Capacity | None:
    """``cap`` with its point and both ends at most ``ceiling``, the layout's saturation rate
    (measure/overload.py: no open loop carries it, so no capacity is above it; a fit can cross
    above it between a probe just under it, whose queue had not built yet, and one over it)."""
    if cap is None or ceiling is None or cap.high <= ceiling:
        return cap
    return replace(cap, point=min(cap.point, ceiling), low=min(cap.low, ceiling), high=ceiling)


def of_probes(rows: Sequence[Mapping[str, str]], confidence: float,
              interval_at: float | None = None, ceiling: float | None = None) -> Capacity | None:
    """The capacity (:func:`binding`) from one layout's slo_probes.csv ``rows`` as the search
    fitted it, at most ``ceiling`` (:func:`capped`; None: the rows carry no ``over_limit``
    counts, or they do not place it)."""
    shares = shares_of(rows)
    return capped(binding(shares, limits_of(list(shares)), confidence, interval_at), ceiling)


@dataclass
class CapacitySearch:
    """The SLO search with its capacity estimate: the bracket of measure/slosearch.Search first
    (its probes, repeats and confirm round, unchanged), then ``refine`` probes either side of the
    estimated capacity in turn until its interval at ``confidence`` is within ±``precision_pct``
    % of it (after at least :data:`MIN_REFINE` of them: stopping on the first narrow interval
    alone covers the truth less often than stated, bench_slo_capacity), or ``max_refine`` of them
    are spent (``precision_pct`` None: no refine probe, the estimate is
    still given). ``limits`` maps each percentile limit's key to its allowance; every probe
    records, per limit, how many of its judged requests were over it."""

    bracket: Search
    limits: dict[str, float]
    confidence: float
    precision_pct: float | None = None
    max_refine: int = 0
    # the layout's saturation rate (measure/overload.py): a refine probe at or above it is
    # overloaded by rule and teaches the fit nothing, so refines stay below it
    ceiling: float | None = None
    shares: dict[str, list[Share]] = field(default_factory=dict)
    rounds: list[Probe] = field(default_factory=list)  # every probe, refines included
    _pending: tuple[float, str] | None = None

    @property
    def refines(self) -> int:
        return sum(p.phase == "refine" for p in self.rounds)

    def capacity(self) -> Capacity | None:
        """The binding limit's capacity (:func:`binding`), at most the ``ceiling``
        (:func:`capped`)."""
        return capped(binding(self.shares, self.limits, self.confidence), self.ceiling)

    def interval(self, saturation: float | None = None) -> tuple[float, float | None] | None:
        """Where the capacity lies by the bracket alone, for a layout that meets the SLO but
        whose probes the fit cannot bound (None: nothing was within): from the bracket's low end
        (a load within on every repeat, each at the SLO's confidence) to the lowest load that
        certainly is not, the lower of ``saturation`` (measure/overload.py: no open loop carries
        it) and the lowest load of a probe with every judged request over a percentile limit
        (an overloaded probe is recorded so); the upper end None when neither is known."""
        low = self.bracket.outcome().low
        if low is None:
            return None
        over = [s.load for shares in self.shares.values() for s in shares
                if s.n >= 5 and s.over == s.n and s.load > low]
        ends = over + ([saturation] if saturation is not None and saturation > low else [])
        return low, min(ends) if ends else None

    def crossing(self) -> float | None:
        """Where the lowest crossing lies by the probes' shares before any fit (None: no
        percentile limit's share crossed its allowance)."""
        places = [x for key, allowance in self.limits.items()
                  if (x := next_load(self.shares.get(key, []), allowance)) is not None]
        return min(places) if places else None

    def next(self) -> tuple[float, str] | None:
        """The next (load, phase) to measure, or None when the search is over."""
        if self._pending is not None:
            return self._pending
        step = self.bracket.next()
        if step is None and self.precision_pct is not None and self.refines < self.max_refine:
            cap = self.capacity()
            if cap is None or cap.half_width_pct > self.precision_pct or self.refines < MIN_REFINE:
                load = cap.point if cap is not None else self.crossing()
                top = self._top()
                if top is not None and (load is None or load >= top):
                    # the crossing the shares show lies above what the layout serves: the
                    # capacity is below the ceiling, so probe between the highest load within
                    # the allowance and it
                    below = [s.load for key, shares in self.shares.items() for s in shares
                             if s.load < top and s.n and s.over / s.n
                             <= self.limits.get(key, 1.0)]
                    load = math.sqrt(max(below) * top) if below else None
                if load is not None:
                    # either side of the estimate in turn, by the precision asked: the slope of
                    # the share is learnt as well as where it crosses
                    load *= (1.0 + self.precision_pct / 100.0) ** (
                        1 if self.refines % 2 else -1)
                    b = self.bracket
                    top = self._top()
                    high = b.max_load if top is None else min(b.max_load, top)
                    load = min(max(load, b.min_load), max(high, b.min_load))
                    step = (float(max(1, round(load))) if b.integer else load, "refine")
        self._pending = step
        return step

    def _top(self) -> float | None:
        """The highest load a refine probe may ask: half the precision step under the
        ``ceiling`` (at it the probe is overloaded by rule; None: no ceiling)."""
        if self.ceiling is None or self.precision_pct is None:
            return None
        return self.ceiling / (1.0 + self.precision_pct / 200.0)

    def record(self, load: float, within: bool, over: dict[str, tuple[int, int]],
               unproven: bool = False) -> None:
        """The verdict of the round asked by the last ``next()`` and, per limit key, its
        (requests over the limit, requests judged); ``unproven``: as the bracket's
        (measure/slosearch.Search.record)."""
        if self._pending is None or self._pending[0] != load:
            raise ValueError(f"load {load} was not asked (pending: {self._pending})")
        phase = self._pending[1]
        self._pending = None
        if phase != "refine":
            self.bracket.record(load, within, unproven)
        self.rounds.append(Probe(load, phase, within))
        for key in self.limits:
            k, n = over.get(key, (0, 0))
            self.shares.setdefault(key, []).append(Share(load, k, n))
