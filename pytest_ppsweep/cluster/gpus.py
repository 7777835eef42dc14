"""The nodes' GPUs as ``nvidia-smi`` reports them: GpuMemory and the parser of its CSV output (the
real formats, with or without header and units, as captured on an H200), and one call's answer
for several nodes split. The cluster layer asks the nodes (``cluster.nodeinfo.query_gpus``).

The measure layer snapshots these at four moments and applies the worst-rank rule
(:mod:`pytest_ppsweep.measure.gpu`, :mod:`pytest_ppsweep.measure.snapshots`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass

QUERY_FIELDS = ("index", "name", "memory.used", "memory.total")
QUERY_ARGS = (f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits")
# In a local cluster's ``nvidia_smi``: every node's address, comma-separated, in one call whose
# output gives each node's answer after a line ``==> <address> <==`` (split_nodes).
HOSTS_PLACEHOLDER = "{hosts}"


class SmiParseError(ValueError):
    """nvidia-smi printed something that is not the CSV we asked for."""


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's memory at one moment, in MiB."""

    node: str
    index: int
    name: str
    used_mib: int
    total_mib: int

    @property
    def headroom_mib(self) -> int:
        return self.total_mib - self.used_mib


def _mib(value: str, where: str) -> int:
    text = value.strip().removesuffix("MiB").strip()
    try:
        return int(float(text))
    except ValueError:
        raise SmiParseError(f"{where}: expected a MiB value, found {value!r}") from None


def parse_query_gpu(text: str, node: str, fields: Iterable[str] = QUERY_FIELDS) -> list[GpuMemory]:
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` output."""
    rows = [r for r in csv.reader(io.StringIO(text), skipinitialspace=True) if r]
    if not rows:
        raise SmiParseError(f"{node}: nvidia-smi printed nothing")
    names = list(fields)
    if rows[0] and rows[0][0].strip() == "index":
        # Header present: take the column order from it ("memory.used [MiB]" → "memory.used").
        names = [h.split(" [")[0].strip() for h in rows[0]]
        rows = rows[1:]
    need = ("index", "memory.used", "memory.total")
    missing = [n for n in need if n not in names]
    if missing:
        raise SmiParseError(f"{node}: nvidia-smi columns {names} lack {missing}")
    out: list[GpuMemory] = []
    for row in rows:
        if len(row) != len(names):
            raise SmiParseError(f"{node}: expected {len(names)} columns, found {row!r}")
        col = dict(zip(names, (c.strip() for c in row), strict=True))
        where = f"{node} GPU {col['index']}"
        try:
            index = int(col["index"])
        except ValueError:
            raise SmiParseError(f"{node}: expected a GPU index, found {col['index']!r}") from None
        out.append(
            GpuMemory(
                node=node,
                index=index,
                name=col.get("name", ""),
                used_mib=_mib(col["memory.used"], where),
                total_mib=_mib(col["memory.total"], where),
            )
        )
    return out


def split_nodes(text: str, addresses: Iterable[str]) -> dict[str, str]:
    """One call's output for several nodes (``HOSTS_PLACEHOLDER``) → {address: its output}.

    Each node's part follows a line ``==> <address> <==``; a node without one is an error."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines(keepends=True):
        head = line.strip()
        if head.startswith("==> ") and head.endswith(" <=="):
            current = parts.setdefault(head[4:-4].strip(), [])
        elif current is not None:
            current.append(line)
        elif head:
            raise SmiParseError(f"nvidia-smi for several nodes: output before the first node: "
                                f"{head[:200]!r}")
    wanted = list(addresses)
    missing = [a for a in wanted if a not in parts]
    if missing:
        raise SmiParseError(
            f"nvidia-smi for nodes {', '.join(wanted)}: no '==> <address> <==' part for "
            f"{', '.join(missing)}"
        )
    return {a: "".join(parts[a]) for a in wanted}
