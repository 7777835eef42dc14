"""Small statistics of the client benchmarks: percentiles, CPU seconds, load averages."""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Sequence


def loadavg() -> str:
    """``uptime``-style load averages and the CPU count."""
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} CPUs)"


def percentile(values: Sequence[float], q: float) -> float:
    """``np.percentile`` with linear interpolation (bench_serving's definition); NaN if empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def cpu_seconds(usage: resource.struct_rusage) -> float:
    """User + system CPU seconds of an rusage."""
    return usage.ru_utime + usage.ru_stime
