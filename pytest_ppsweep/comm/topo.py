"""``nvidia-smi topo -m``: the GPU-to-GPU connection matrix and each GPU's NUMA affinity, and the
label of a set of GPUs on one node: same PCIe/NUMA island, or across islands.

The matrix uses nvidia-smi's legend: ``X`` self, ``SYS`` across NUMA nodes (QPI/UPI), ``NODE``
across PCIe host bridges of one NUMA node, ``PHB`` through a host bridge, ``PXB`` several PCIe
bridges, ``PIX`` at most one bridge, ``NV#`` # bonded NVLinks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["GpuTopology", "TopoError", "island_label", "parse_topo"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"GPU(\d+)$")
_LINKS = {"X", "SYS", "NODE", "PHB", "PXB", "PIX"}


class TopoError(ValueError):
    """Output that is not ``nvidia-smi topo -m``'s matrix (the message says what is wrong)."""


@dataclass(frozen=True)
class GpuTopology:
    """What ``topo -m`` says about one node's GPUs."""

    gpus: tuple[int, ...]
    links: dict[tuple[int, int], str] = field(default_factory=dict)  # (a, b) → SYS, PIX, NV18…
    numa: dict[int, str] = field(default_factory=dict)  # GPU → NUMA affinity ("0", "N/A")
    cpus: dict[int, str] = field(default_factory=dict)  # GPU → CPU affinity ("0-15")

    def link(self, a: int, b: int) -> str:
        return "X" if a == b else self.links.get((a, b), "?")


def parse_topo(text: str, source: str = "nvidia-smi topo -m") -> GpuTopology:
    """Parse the matrix (ANSI underline codes and NIC rows/columns are ignored)."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if re.match(r"\s+GPU0\b", line)
                      or line.startswith("\tGPU0")), None)
    if header_at is None:
        raise TopoError(f"{source}: no header row starting with GPU0 (not `nvidia-smi topo -m`)")
    header = [c.strip() for c in lines[header_at].split("\t")]
    header = header[1:] if header and not header[0] else header
    gpus: list[int] = []
    links: dict[tuple[int, int], str] = {}
    numa: dict[int, str] = {}
    cpus: dict[int, str] = {}
    for line in lines[header_at + 1:]:
        cells = [c.strip() for c in line.split("\t")]
        if not cells or not (m := _GPU.match(cells[0])):
            if gpus and (not line.strip() or line.startswith("Legend")):
                break
            continue
        a = int(m[1])
        gpus.append(a)
        for name, value in zip(header, cells[1:], strict=False):
            if (g := _GPU.match(name)) is not None:
                if value not in _LINKS and not re.fullmatch(r"NV\d+", value):
                    raise TopoError(f"{source}: GPU{a} to {name}: unknown link {value!r}")
                links[(a, int(g[1]))] = value
            elif name == "NUMA Affinity":
                numa[a] = value
            elif name == "CPU Affinity":
                cpus[a] = value
    if not gpus:
        raise TopoError(f"{source}: a header but no GPU rows")
    return GpuTopology(tuple(gpus), links, numa, cpus)


def island_label(topo: GpuTopology, gpus: Sequence[int]) -> str:
    """``same PCIe/NUMA island``, ``NVLink``, or ``across N NUMA islands`` for GPUs of one node."""
    gpus = list(gpus)
    unknown = [g for g in gpus if g not in topo.gpus]
    if unknown:
        return f"GPU{unknown[0]} not in topo -m"
    pairs = [topo.link(a, b) for a in gpus for b in gpus if a < b]
    if pairs and all(p.startswith("NV") for p in pairs):
        return "NVLink"
    islands = {topo.numa.get(g, "N/A") for g in gpus}
    if "SYS" in pairs or len(islands - {"N/A"}) > 1:
        n = len(islands - {"N/A"}) or 2
        return f"across {n} NUMA islands"
    return "same PCIe/NUMA island"
