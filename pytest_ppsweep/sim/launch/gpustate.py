"""Each rank publishes its node's per-GPU memory to ``$PPSWEEP_SIM_STATE_DIR/<host>.json``.

The nvidia-smi shim (sim/smi.py) reads the file; it is written atomically (temp file +
``os.replace``). When the rank exits it leaves only the node's facts (GPU_FACTS and the
profile's name, no pid and no GPU use), so the GPUs read idle again afterwards and the shim
shows them without reading the profile (a fifth of its start) while it is asked for that profile.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

# typing.TYPE_CHECKING without importing typing (mypy reads the name): the nvidia-smi shim, an
# interpreter per call, imports this module
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ..model.profile import GpuSpec

# Where the state files are without PPSWEEP_SIM_STATE_DIR (settings reads the variable): a
# folder per user and network namespace under it (default_state_dir).
DEFAULT_STATE_DIR = "/tmp/ppsweep-sim"
STATE_DIR_ENV = "PPSWEEP_SIM_STATE_DIR"


def default_state_dir() -> Path:
    """``/tmp/ppsweep-sim-<uid>-<netns>``: the nodes of one user in one network namespace.

    Node addresses are only unique within a network namespace (two test-host namespaces, or two
    users' loopback clusters, both have a 127.0.6.1), and a folder one user made cannot be
    written by another: one shared folder let one user's ranks read as another's GPUs, and a
    root-owned folder turned every other user's writes into silent no-ops."""
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = 0
    return Path(f"{DEFAULT_STATE_DIR}-{os.getuid()}-{netns}")


def state_dir_of(env: Mapping[str, str]) -> Path:
    """``$PPSWEEP_SIM_STATE_DIR``, else :func:`default_state_dir`."""
    given = env.get(STATE_DIR_ENV, "")
    return Path(given) if given else default_state_dir()
# Each GPU's busy emulated seconds since the node's first rank (a state file's key; the shim's
# energy counter, sim/smi.py, is idle watts over the time plus the busy extra over these).
BUSY_KEY = "busy_s"
# What a state file says of its node's GPUs besides their use (gpu_facts).
GPU_FACTS = ("gpu_count", "gpu_name", "memory_total_mib", "driver_version", "idle_used_mib")


class GpuUse:
    """Memory held on one GPU by the rank process. A plain class, like the shim's records: the
    nvidia-smi shim imports this module, and dataclasses (which imports inspect) would be a
    sixth of its start."""

    __slots__ = ("index", "used_mib")

    def __init__(self, index: int, used_mib: int) -> None:
        self.index = index
        self.used_mib = used_mib


def gpu_facts(gpu: GpuSpec) -> dict[str, Any]:
    """The GPU_FACTS of a node from the profile's ``[gpu]`` section: what a rank publishes,
    and what the shim shows for an idle node."""
    facts = (gpu.gpus_per_node, gpu.name, gpu.memory_total_mib, gpu.driver_version,
             gpu.idle_used_mib)  # fmt: skip
    return dict(zip(GPU_FACTS, facts, strict=True))


def state_path(state_dir: Path, host: str) -> Path:
    """The state file of a node address."""
    return state_dir / f"{host}.json"


class GpuStatePublisher:
    """Writes and removes the state file of one node."""

    def __init__(self, state_dir: Path, host: str, pid: int, gpu_info: dict[str, Any]) -> None:
        self.path = state_path(state_dir, host)
        self.pid = pid
        self.gpu_info = gpu_info
        self.warned = False  # a write failed and the log said so
        # BUSY_KEY: each GPU's busy emulated seconds, over every rank this node ran (the energy
        # counter never goes down while the "driver" stays loaded): the earlier ranks' total is
        # this rank's base
        before = read_state(state_dir, host) or {}
        self.busy_base: dict[str, float] = {
            str(k): float(v) for k, v in dict(before.get(BUSY_KEY) or {}).items()}
        self.busy: dict[str, float] = dict(self.busy_base)

    def publish(self, gpus: list[GpuUse], utilization: int = 0,
                busy_s: Mapping[int, float] | None = None) -> None:
        """Replace the node's state atomically; ``busy_s``: this rank's busy emulated seconds
        per GPU index so far (None: as last published)."""
        if busy_s is not None:
            self.busy = {**self.busy_base}
            for index, seconds in busy_s.items():
                self.busy[str(index)] = self.busy_base.get(str(index), 0.0) + seconds
        self._write({
            **self.gpu_info,
            "pid": self.pid,
            "updated": time.time(),
            "utilization_gpu": utilization,
            "gpus": [{"index": g.index, "used_mib": g.used_mib} for g in gpus],
            BUSY_KEY: self.busy,
        })

    def _write(self, doc: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{self.pid}.tmp")
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, self.path)
        except OSError as exc:
            # GPU state is diagnostics only: the rank stays up, but says once in its log why
            # nvidia-smi will read its node as idle.
            if not self.warned:
                self.warned = True
                sys.stderr.write(f"ppsweep-sim: cannot publish GPU state to {self.path}: "
                                 f"{exc} (nvidia-smi will show this node idle)\n")

    def release(self) -> None:
        """The rank is gone: leave the node's facts only (no pid, no GPU use: an idle node),
        if the file is still ours."""
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads(self.path.read_text())
            if doc.get("pid") == self.pid:
                self._write({**self.gpu_info, BUSY_KEY: self.busy})

    def remove(self) -> None:
        """Delete the state file (only if it is still ours)."""
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads(self.path.read_text())
            if doc.get("pid") == self.pid:
                self.path.unlink()


def read_state(state_dir: Path, host: str) -> dict[str, Any] | None:
    """The published state of ``host`` or None (idle node)."""
    try:
        doc: dict[str, Any] = json.loads(state_path(state_dir, host).read_text())
    except (OSError, ValueError):
        return None
    return doc
