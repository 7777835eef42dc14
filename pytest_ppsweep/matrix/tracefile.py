"""The Mooncake trace file format: JSONL, one request a line, read and checked line by line.

A line holds ``timestamp`` (ms from the trace's start), ``input_length`` and ``output_length``
(tokens) and ``hash_ids``, one id per block of ``block_size`` input tokens (512 in Mooncake's
published traces; the last block may be partial). It lives with the sweep file because a
``type = "trace"`` workload is checked when the sweep is read (its request count and lengths are
the workload's), before anything boots; measure/tracereplay.py builds the prompts and schedule.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MOONCAKE_BLOCK", "TraceError", "TraceRequest", "file_sha256", "read_requests",
           "write_trace"]

MOONCAKE_BLOCK = 512  # tokens per hash block in Mooncake's published traces
_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")


class TraceError(ValueError):
    """A trace file that is not a Mooncake trace: names the file, the line and the key, what was
    expected and what was found."""


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def _line_error(path: Path, no: int, what: str) -> TraceError:
    return TraceError(f"{path}: line {no}: {what}")


def read_requests(path: Path, block_size: int = MOONCAKE_BLOCK) -> tuple[TraceRequest, ...]:
    """A Mooncake-format JSONL file, every line checked: its four keys with their types, lengths
    ≥ 1, hash ids that cover the input length in ``block_size`` blocks, timestamps that never go
    back. Blank lines are skipped."""
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file (expected Mooncake-format JSONL)")
    requests: list[TraceRequest] = []
    last_ts = -math.inf
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise _line_error(path, no, f"expected a JSON object, found {line[:80]!r}") from exc
        if not isinstance(row, dict):
            raise _line_error(path, no, f"expected a JSON object, found {type(row).__name__}")
        missing = [k for k in _KEYS if k not in row]
        if missing:
            raise _line_error(path, no, f"missing key {', '.join(missing)} (expected "
                              f"{', '.join(_KEYS)}; found {', '.join(row) or 'none'})")
        ts = row["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, int | float) or ts < 0:
            raise _line_error(path, no, f"timestamp: expected ms ≥ 0, found {ts!r}")
        if ts < last_ts:
            raise _line_error(path, no, f"timestamp: expected ≥ the line before's {last_ts}, "
                              f"found {ts}")
        last_ts = ts
        for key in ("input_length", "output_length"):
            v = row[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise _line_error(path, no, f"{key}: expected an integer ≥ 1, found {v!r}")
        ids = row["hash_ids"]
        if not isinstance(ids, list) or not all(
                isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in ids):
            raise _line_error(path, no, f"hash_ids: expected a list of integers ≥ 0, found "
                              f"{str(ids)[:80]}")
        need = math.ceil(row["input_length"] / block_size)
        if len(ids) != need:
            raise _line_error(path, no, f"hash_ids: expected {need} (input_length "
                              f"{row['input_length']} in blocks of {block_size}), found {len(ids)}")
        requests.append(TraceRequest(float(ts), row["input_length"], row["output_length"],
                                     tuple(ids)))
    if not requests:
        raise TraceError(f"{path}: no request (expected one JSON object per line)")
    return tuple(requests)


def file_sha256(path: Path) -> str:
    """The sha256 (hex) of a trace file's bytes: what names the workload in run.json and the
    manifests (the path may differ between checkouts, the trace may not)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_trace(path: Path, requests: Iterable[TraceRequest]) -> None:
    """Write requests as Mooncake-format JSONL (what :func:`read_requests` reads)."""
    path.write_text("".join(
        json.dumps({"timestamp": int(r.timestamp_ms) if float(r.timestamp_ms).is_integer()
                    else r.timestamp_ms, "input_length": r.input_length,
                    "output_length": r.output_length, "hash_ids": list(r.hash_ids)}) + "\n"
        for r in requests), encoding="utf-8")
