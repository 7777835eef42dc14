"""nccl-tests' ``all_reduce_perf`` output: the results table, as its src/util.cu prints it.

Header (``# size count type redop root time algbw busbw #wrong time algbw busbw #wrong``, the
out-of-place then the in-place columns; older releases have no ``root`` column) and one row per
size::

       134217728      33554432     float     sum      -1   1652.2   81.24  152.32      0 …

time is in µs (printed with 7 significant characters: ``12646`` or ``1.2e+05``), algbw and busbw
in GB/s; ``#wrong`` is ``N/A`` when run with ``-c 0``. The out-of-place columns are what the
seeds quote; a row with wrong elements is kept and flagged, and the caller fails on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NcclPerfError", "PerfRow", "parse_all_reduce_perf"]

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


class NcclPerfError(ValueError):
    """Output without an all_reduce_perf table (the message names its source)."""


@dataclass(frozen=True)
class PerfRow:
    size_bytes: int
    count: int
    dtype: str
    redop: str
    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    wrong: int | None  # None: not checked (-c 0)
    in_place_time_us: float | None = None
    in_place_busbw_gbs: float | None = None


def _wrong(cell: str) -> int | None:
    return None if cell == "N/A" else int(float(cell))


def parse_all_reduce_perf(text: str, source: str = "all_reduce_perf") -> list[PerfRow]:
    """Every result row of the table; ``NcclPerfError`` when there is none."""
    with_root: bool | None = None
    rows: list[PerfRow] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            words = stripped.lstrip("#").split()
            if words[:2] == ["size", "count"]:
                with_root = "root" in words
            continue
        if with_root is None or not stripped:
            continue
        cells = stripped.split()
        first = 5 if with_root else 4
        if len(cells) < first + 4 or not cells[0].isdigit() or not cells[1].isdigit():
            continue
        body = cells[first:]
        if not all(re.fullmatch(_NUM, c) for c in body[:3]):
            raise NcclPerfError(f"{source}: row for {cells[0]} B: time/algbw/busbw not numbers: "
                                f"{' '.join(body[:3])}")
        in_place = body[4:8] if len(body) >= 8 else []
        rows.append(PerfRow(
            size_bytes=int(cells[0]), count=int(cells[1]), dtype=cells[2], redop=cells[3],
            time_us=float(body[0]), algbw_gbs=float(body[1]), busbw_gbs=float(body[2]),
            wrong=_wrong(body[3]),
            in_place_time_us=float(in_place[0]) if in_place else None,
            in_place_busbw_gbs=float(in_place[2]) if in_place else None,
        ))
    if with_root is None:
        raise NcclPerfError(f"{source}: no '# size count type redop …' header: not "
                            "all_reduce_perf output")
    if not rows:
        raise NcclPerfError(f"{source}: a header but no result rows")
    return rows
