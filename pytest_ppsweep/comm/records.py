"""The worker's JSON lines (``"ppsweep_comm": 1``), read back from each node's log: the results
of rank 0 and every rank's errors, turned into one failure message naming node and rank."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CommOutput", "read_lines", "read_output"]

KIND_TEXT = {
    "wrong_sum": "wrong sum",
    "hang": "hang (bounded wait)",
    "init": "init failure",
    "exception": "error",
}


def read_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The worker's events among other output (warnings, tracebacks stay in the log)."""
    out = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{") or '"ppsweep_comm"' not in line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and event.get("ppsweep_comm") == 1:
            out.append(event)
    return out


@dataclass
class CommOutput:
    """What the nodes of one domain printed."""

    results: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    started: set[int] = field(default_factory=set)  # global ranks
    done: set[int] = field(default_factory=set)
    last: dict[int, dict[str, Any]] = field(default_factory=dict)  # last event per rank

    def problems(self, world: int, where: Sequence[str]) -> list[str]:
        """Failure lines: each error with its node and rank; ranks that never finished."""
        lines = []
        order = {"wrong_sum": 0, "init": 1, "hang": 2, "exception": 3}
        for e in sorted(self.errors, key=lambda e: (order.get(str(e.get("kind")), 9),
                                                    int(e.get("rank", 0)))):
            rank = int(e.get("rank", -1))
            node = e.get("node", "?")
            lines.append(f"{KIND_TEXT.get(str(e.get('kind')), str(e.get('kind')))}: "
                         f"{node} rank {rank}: {e.get('message', '')}")
        failed = {int(e.get("rank", -1)) for e in self.errors}
        missing = [r for r in range(world) if r not in self.done and r not in failed]
        if missing and self.errors:  # they stopped because of the failure above
            lines.append(f"no result from {len(missing)} other rank(s) ({_ranges(missing)}): "
                         "stopped after the failure above")
            missing = []
        for rank in missing:
            last = self.last.get(rank)
            seen = f"last event {last.get('event')!r}" if last else "no output at all"
            node = where[rank] if rank < len(where) else "?"
            lines.append(f"no result: {node} rank {rank}: {seen}")
        return lines


def _ranges(ranks: Sequence[int]) -> str:
    """[0, 1, 2, 5] → ``0-2, 5``."""
    out: list[str] = []
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(f"{start}-{prev}" if prev > start else str(start))
        if r is not None:
            start = prev = r
    return ", ".join(out)


def read_output(logs: Iterable[Path]) -> CommOutput:
    out = CommOutput()
    for path in logs:
        if not path.is_file():
            continue
        for event in read_lines(path.read_text(encoding="utf-8", errors="replace").splitlines()):
            kind = event.get("event")
            rank = event.get("rank")
            if isinstance(rank, int):
                out.last[rank] = event
            if kind == "result":
                out.results.append(event)
            elif kind == "error":
                out.errors.append(event)
            elif kind == "start" and isinstance(rank, int):
                out.started.add(rank)
            elif kind == "done" and isinstance(rank, int) and event.get("status", 0) == 0:
                out.done.add(rank)
    out.results.sort(key=lambda e: int(e.get("size_bytes", 0)))
    return out
