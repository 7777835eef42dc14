"""A workload's SLO (``[workload.slo]`` or ``[workloads.<name>.slo]``) and its load search.

Limits, in seconds (all optional, at least one):

* ``<metric>_p<q>_s`` (metric ``ttft``, ``tpot``, ``itl`` or ``e2e``; q 50, 90, 95 or 99): that
  percentile of the round, over its completed requests (bench_serving's definitions), must be
  at most the limit;
* ``ttft_s``, ``tpot_s``, ``itl_s`` (its largest ITL), ``e2e_s``: per request. A request is
  *good* only if it completed and met every per-request limit, so goodput never counts a
  failure; ``attainment`` (default 1.0) is the share of good requests a round needs.

The search for the highest load within the SLO on one boot (measure/slosearch.py):

* ``search``: ``"rate"`` (requests per second, open loop; default) or ``"concurrency"``;
* ``min``, ``max`` (required): the load range searched (req/s, or C);
* ``precision``: the search stops when the bracket is this narrow (default (max − min) / 16;
  concurrency: 1);
* ``max_probes`` (default 8, at most 64): the most probes before the repeats at the final load;
* ``precision_pct`` (default 10): after the bracket, the capacity is estimated from every probe
  (the share of requests over each percentile limit, fitted against the load:
  stats/capacity.py) with an interval at ``confidence``; ``refine`` probes near the
  estimate go on until that interval is within ± this % of it;
* ``max_refine`` (default 16, at most 64; 0: none): the most refine probes;
* ``requests`` (default: the workload's ``num_requests``): the requests every probe sends. A
  probe starts from an empty queue: it must last well beyond the queue's warm-up near the
  capacity, or the capacity is overestimated (benchmarks/bench_slo_capacity.py: on the 16K
  prefill model 40 requests a probe overestimate it, 200 do not). ``"auto"``: the first probe
  sends the workload's size; the others the fewest that keep the estimate within
  ``precision_pct``, computed from the layout's measured prefill time and the first probe's
  TTFT (measure/probesize.py; a queue model, stated with the size);
* ``max_concurrency`` (default 0: none): the cap on requests in flight while searching a rate;
* ``confidence`` (default 0.95): a percentile limit is met only when a one-sided binomial
  (Clopper-Pearson) bound at this confidence keeps the share of requests over the limit within
  the percentile's allowance (measure/withinslo.py);
* ``trim`` (default 0.1, below 0.5): the share of a probe's requests, by arrival, left out of its
  percentiles at each end: the warm-up (the first arrivals meet an empty queue) and the drain
  (the last ones, no arrivals behind them). The N/N rule and goodput still count every request.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pytest_ppsweep.matrix.schema import MatrixError, Reader

__all__ = [
    "DEFAULT_CONFIDENCE",
    "METRICS",
    "PERCENTILES",
    "SEARCH_KINDS",
    "SLO_KEYS",
    "SloLimit",
    "SloSpec",
    "percentile_of",
    "read_rate",
    "read_slo",
]  # fmt: skip

METRICS = ("ttft", "tpot", "itl", "e2e")
PERCENTILES = (50, 90, 95, 99)
SEARCH_KINDS = ("rate", "concurrency")
_PCT_KEY = re.compile(r"(ttft|tpot|itl|e2e)_p(50|90|95|99)_s")
_REQ_KEYS = tuple(f"{m}_s" for m in METRICS)
SEARCH_KEYS = ("search", "min", "max", "precision", "max_probes", "max_concurrency",
               "attainment", "confidence", "trim", "precision_pct", "max_refine",
               "requests")  # fmt: skip
SLO_KEYS = (*(f"{m}_p{q}_s" for m in METRICS for q in PERCENTILES), *_REQ_KEYS, *SEARCH_KEYS)
MAX_PROBES_CAP = 64
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class SloLimit:
    """One limit: ``metric`` (ttft/tpot/itl/e2e), ``percentile`` (None: per request), seconds."""

    metric: str
    percentile: int | None
    limit_s: float

    @property
    def key(self) -> str:
        """The sweep-file key (also the results' column of a percentile limit)."""
        return f"{self.metric}_p{self.percentile}_s" if self.percentile else f"{self.metric}_s"

    def __str__(self) -> str:
        what = f"{self.metric.upper()} p{self.percentile}" if self.percentile else (
            f"{self.metric.upper()} per request")
        return f"{what} ≤ {self.limit_s:g} s"


@dataclass(frozen=True)
class SloSpec:
    """A workload's latency target and how its highest sustainable load is searched."""

    limits: tuple[SloLimit, ...]
    search: str = "rate"
    low: float = 1.0
    high: float = 16.0
    precision: float = 1.0
    max_probes: int = 8
    max_concurrency: int = 0
    attainment: float = 1.0
    confidence: float = DEFAULT_CONFIDENCE
    trim: float = 0.1
    precision_pct: float = 10.0
    max_refine: int = 16
    requests: int = 0  # a probe's requests; 0: the workload's num_requests
    # requests = "auto": sized before each layout's search (measure/probesize.py)
    auto_requests: bool = False

    def probe_requests(self, num_requests: int) -> int:
        """The requests a probe sends (``requests``, else the workload's ``num_requests``)."""
        return self.requests or num_requests

    @property
    def percentile_limits(self) -> tuple[SloLimit, ...]:
        return tuple(lim for lim in self.limits if lim.percentile is not None)

    @property
    def request_limits(self) -> tuple[SloLimit, ...]:
        return tuple(lim for lim in self.limits if lim.percentile is None)

    @property
    def unit(self) -> str:
        return "req/s" if self.search == "rate" else "concurrent requests"

    def text(self) -> str:
        """The SLO in one line (``TTFT p50 ≤ 5 s``; joined with ``and``)."""
        return " and ".join(str(lim) for lim in self.limits)


def percentile_of(key: str) -> int | None:
    """The percentile of a percentile limit's key (``ttft_p50_s`` → 50), None for any other key
    (the key is the results' column and slo_probes.csv's ``over_limit`` name of the limit)."""
    found = _PCT_KEY.fullmatch(key)
    return int(found.group(2)) if found else None


def read_rate(r: Reader, key: str) -> float:
    """A request rate: a number > 0 or ``"inf"`` (bench_serving's ``--request-rate``)."""
    value = r.raw(key)
    if value is None:
        return math.inf
    if value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MatrixError(f"{r.path}: key '{r.where}.{key}': expected a number > 0 (requests "
                          f"per second) or \"inf\", found {type(value).__name__} {value!r}")
    rate = r.number(key)  # at most 64 bits and finite (an int too large for a float is named)
    if not rate > 0:
        raise MatrixError(f"{r.path}: key '{r.where}.{key}': expected a number > 0 (requests "
                          f"per second) or \"inf\", found {type(value).__name__} {value!r}")
    return rate


def read_slo(w: Reader, num_requests: int) -> SloSpec | None:
    """The ``slo`` table of one workload; None when it has none. Every error names file, key,
    expected and found."""
    if "slo" not in w.data:
        return None
    tab = w.table("slo")
    tab.only(SLO_KEYS)
    limits: list[SloLimit] = []
    for key in tab.keys():  # noqa: SIM118 (Reader is not a dict)
        if key in SEARCH_KEYS:
            continue
        value = tab.number(key, minimum=0.0)
        if not value > 0:
            raise MatrixError(f"{tab.path}: key '{tab.where}.{key}': expected a limit > 0 "
                              f"seconds, found {value!r}")
        match = _PCT_KEY.fullmatch(key)
        limits.append(SloLimit(key.split("_")[0], int(match.group(2)) if match else None, value))
    if not limits:
        raise MatrixError(f"{tab.path}: key '{tab.where}': expected at least one limit "
                          f"({', '.join(SLO_KEYS[:3])}, … ttft_s, tpot_s, itl_s, e2e_s), "
                          "found none")
    search = tab.choice("search", SEARCH_KINDS, default="rate")
    auto_requests = tab.raw("requests") == "auto"
    if isinstance(tab.raw("requests"), str) and not auto_requests:
        raise MatrixError(f"{tab.path}: key '{tab.where}.requests': expected an integer ≥ 1 or "
                          f"\"auto\", found {tab.raw('requests')!r}")
    requests = (tab.integer("requests", default=0, minimum=1)
                if "requests" in tab.data and not auto_requests else 0)
    for bound in ("min", "max"):
        if bound not in tab.data:
            unit = "req/s" if search == "rate" else "C"
            raise MatrixError(f"{tab.path}: key '{tab.where}.{bound}': expected the load range "
                              f"searched ({unit}), found nothing")
    if search == "rate":
        low, high = tab.number("min", minimum=0.0), tab.number("max", minimum=0.0)
        if not low > 0:
            raise MatrixError(f"{tab.path}: key '{tab.where}.min': expected a rate > 0, "
                              f"found {low!r}")
    else:
        low = float(tab.integer("min", minimum=1))
        high = float(tab.integer("max", minimum=1, maximum=requests or num_requests))
    if not high > low:
        raise MatrixError(f"{tab.path}: key '{tab.where}.max': expected more than min "
                          f"({low:g}), found {high:g}")
    default_precision = 1.0 if search == "concurrency" else (high - low) / 16
    precision = tab.number("precision", default=default_precision, minimum=0.0)
    if not precision > 0 or precision >= high - low:
        raise MatrixError(f"{tab.path}: key '{tab.where}.precision': expected 0 < precision < "
                          f"max − min ({high - low:g}), found {precision!r}")
    if search == "concurrency":
        precision = max(1.0, float(math.ceil(precision)))
    attainment = tab.number("attainment", default=1.0, minimum=0.0)
    if not 0 < attainment <= 1:
        raise MatrixError(f"{tab.path}: key '{tab.where}.attainment': expected 0 < share ≤ 1, "
                          f"found {attainment!r}")
    confidence = tab.number("confidence", default=DEFAULT_CONFIDENCE, minimum=0.0)
    if not 0.5 <= confidence < 1:
        raise MatrixError(f"{tab.path}: key '{tab.where}.confidence': expected 0.5 ≤ confidence "
                          f"< 1 (the binomial bound's level), found {confidence!r}")
    trim = tab.number("trim", default=0.1, minimum=0.0)
    if not 0 <= trim < 0.5:
        raise MatrixError(f"{tab.path}: key '{tab.where}.trim': expected 0 ≤ share < 0.5 (left "
                          f"out at each end of a probe), found {trim!r}")
    precision_pct = tab.number("precision_pct", default=10.0, minimum=0.0)
    if not 0 < precision_pct < 100:
        raise MatrixError(f"{tab.path}: key '{tab.where}.precision_pct': expected 0 < % < 100 "
                          f"(the capacity interval's half-width), found {precision_pct!r}")
    return SloSpec(
        confidence=confidence, trim=trim, precision_pct=precision_pct, requests=requests,
        auto_requests=auto_requests,
        max_refine=tab.integer("max_refine", default=16, minimum=0, maximum=MAX_PROBES_CAP),
        limits=tuple(limits), search=search, low=low, high=high, precision=precision,
        max_probes=tab.integer("max_probes", default=8, minimum=2, maximum=MAX_PROBES_CAP),
        max_concurrency=tab.integer("max_concurrency", default=0, minimum=0),
        attainment=attainment,
    )
