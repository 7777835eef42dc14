"""``nvidia-smi -q``: the node's driver, CUDA and GPUs as the comm step saves them beside its
results (``comm/<layout>/smi-q-node<r>.txt``), and the one line the report shows of them.

The text is a tree by indentation (4 spaces a level): ``Key : Value`` leaves, sections without a
value, one ``GPU <bus id>`` section per GPU. Read from a real capture on an H200
(tests/data/h200-1gpu/smi-q.txt, driver 580.159.04).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SmiGpu", "SmiQ", "SmiQError", "node_line", "parse_smi_q"]

_GPU_SECTION = re.compile(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$")
_MIB = re.compile(r"(\d+)\s*MiB$")
_LEAF = re.compile(r"(.*?\S)\s+:(.*)$")


class SmiQError(ValueError):
    """Text that is not ``nvidia-smi -q``'s (the message names the source and what is missing)."""


@dataclass(frozen=True)
class SmiGpu:
    """One GPU of ``-q``: the fields the report and the comm step read, and the whole tree."""

    bus_id: str
    product_name: str
    architecture: str
    uuid: str
    persistence_mode: str
    mig_mode: str
    memory_total_mib: int | None
    pcie_gen: str
    pcie_width: str
    fabric_state: str  # NVSwitch fabric ("Completed" on NVSwitch hosts, "N/A" elsewhere)
    tree: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class SmiQ:
    """The node as ``nvidia-smi -q`` describes it."""

    driver_version: str
    cuda_version: str
    attached_gpus: int
    gpus: tuple[SmiGpu, ...]

    def summary(self) -> str:
        """``1 × NVIDIA H200 (143771 MiB), driver 580.159.04, CUDA 13.0, MIG off``."""
        names: dict[str, int] = {}
        for g in self.gpus:
            label = g.product_name + (f" ({g.memory_total_mib} MiB)" if g.memory_total_mib
                                      else "")
            names[label] = names.get(label, 0) + 1
        gpus = ", ".join(f"{n} × {label}" for label, n in names.items()) or "no GPU"
        mig = {g.mig_mode for g in self.gpus}
        mig_text = "MIG off" if mig <= {"Disabled", "N/A", ""} else "MIG " + "/".join(sorted(mig))
        return f"{gpus}, driver {self.driver_version}, CUDA {self.cuda_version}, {mig_text}"


def _tree(lines: Sequence[str]) -> dict[str, Any]:
    """Indentation tree: a key with a value is a leaf; one without is a section (a dict)."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for raw in lines:
        if not raw.strip() or raw.startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        leaf = _LEAF.match(raw.strip())  # "Key<spaces>: value" (a bus id's colons are no key)
        if leaf:
            parent[leaf[1]] = leaf[2].strip()
        else:
            child: dict[str, Any] = {}
            parent[raw.strip()] = child
            stack.append((indent, child))
    return root


def _get(tree: dict[str, Any], *path: str) -> str:
    node: Any = tree
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return ""
        node = node[key]
    return node if isinstance(node, str) else ""


def parse_smi_q(text: str, source: str = "nvidia-smi -q") -> SmiQ:
    """Parse ``nvidia-smi -q`` (text, not ``-x``)."""
    lines = text.replace("\t", "    ").splitlines()
    tree = _tree([line.rstrip() for line in lines])
    if "Driver Version" not in tree:
        raise SmiQError(f"{source}: no 'Driver Version' line (not `nvidia-smi -q`): "
                        f"{text.strip()[:80]!r}")
    gpus = []
    for key, section in tree.items():
        if not isinstance(section, dict) or (m := _GPU_SECTION.match(key)) is None:
            continue
        mem = _MIB.search(_get(section, "FB Memory Usage", "Total"))
        gpus.append(SmiGpu(
            bus_id=m[1], product_name=_get(section, "Product Name"),
            architecture=_get(section, "Product Architecture"), uuid=_get(section, "GPU UUID"),
            persistence_mode=_get(section, "Persistence Mode"),
            mig_mode=_get(section, "MIG Mode", "Current"),
            memory_total_mib=int(mem[1]) if mem else None,
            pcie_gen=_get(section, "PCI", "GPU Link Info", "PCIe Generation", "Current"),
            pcie_width=_get(section, "PCI", "GPU Link Info", "Link Width", "Current"),
            fabric_state=_get(section, "Fabric", "State"), tree=section,
        ))
    attached = _get(tree, "Attached GPUs")
    if not attached.isdigit():
        raise SmiQError(f"{source}: 'Attached GPUs' is {attached!r}, expected a number")
    if int(attached) != len(gpus):
        raise SmiQError(f"{source}: 'Attached GPUs' is {attached} but {len(gpus)} 'GPU <bus id>' "
                        "sections follow")
    return SmiQ(_get(tree, "Driver Version"), _get(tree, "CUDA Version"), int(attached),
                tuple(gpus))


def node_line(texts: dict[str, str]) -> list[str]:
    """``node0: 1 × NVIDIA H200 …`` per saved ``-q`` (node name → text); unparsable ones say why."""
    out = []
    for node, text in texts.items():
        try:
            out.append(f"{node}: {parse_smi_q(text, node).summary()}")
        except SmiQError as exc:
            out.append(f"{node}: {exc}")
    return out
