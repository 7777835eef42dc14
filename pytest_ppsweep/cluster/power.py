"""What a node's GPUs say about their energy: NVML's total-energy counter read on the node, and
``nvidia-smi``'s sampled power as CSV, parsed into plain readings (the integration and its
validity are :mod:`pytest_ppsweep.measure.energy`'s).

NVML's ``nvmlDeviceGetTotalEnergyConsumption`` counts mJ since the driver loaded; it moves every
~100 ms on an H100 (tests/data/energy-h100/counter_updates.csv), so the energy of a window is the
difference of two reads, to within one update at each end. ``nvidia-smi`` samples power instead:
a window's energy is then an integral over samples, valid only where the samples bracket the
window and leave no long gap. :data:`NVML_READ_SCRIPT` is what a node runs (through the
cluster's own node access, as the GPU snapshots are taken); it prints one JSON line, and a node
whose driver lacks the counter says so instead of failing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = [
    "NVML_READ_SCRIPT",
    "CounterRead",
    "EnergyRead",
    "PowerParseError",
    "PowerSample",
    "parse_counter_step",
    "parse_nvml_reads",
    "parse_smi_power_csv",
]

# Run on a node as ``python3 -c NVML_READ_SCRIPT``: every GPU's energy counter (mJ) and power
# (mW) with the node's wall time, one JSON object; ``energy_mj`` is null on a GPU without the
# counter (pre-Volta, or a driver that does not support it).
NVML_READ_SCRIPT = """
import json, time
import pynvml
pynvml.nvmlInit()
out = {"t_wall_s": time.time(), "gpus": []}
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    try:
        e = int(pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
    except pynvml.NVMLError:
        e = None
    try:
        p = int(pynvml.nvmlDeviceGetPowerUsage(h))
    except pynvml.NVMLError:
        p = None
    out["gpus"].append({"index": i, "energy_mj": e, "power_mw": p})
pynvml.nvmlShutdown()
print(json.dumps(out))
"""


@dataclass(frozen=True)
class EnergyRead:
    """One read of every node's GPU energy counters and power: the reads, the counter's step
    where the node says it, and why a node gave none (``node: reason``; the round's energy is
    then not valid, and says so)."""

    reads: tuple[CounterRead, ...]
    samples: tuple[PowerSample, ...]
    step_s: float | None
    problems: tuple[str, ...]
    no_gpus: bool = False  # the cluster has none to read (nvidia_smi is empty: a CPU cluster)
    time_scale: float = 1.0  # counter joules per watt and wall second (the emulator's scale)


class PowerParseError(ValueError):
    """A node's energy or power output that is not what was asked for: names the node and what
    was found."""


@dataclass(frozen=True)
class CounterRead:
    """One read of one GPU's total-energy counter (mJ since the driver loaded)."""

    gpu: str  # "<node>:<index>"
    t_s: float  # wall seconds on the node
    energy_mj: int


@dataclass(frozen=True)
class PowerSample:
    """One power sample of one GPU, in watts, at the node's wall time."""

    gpu: str
    t_s: float
    power_w: float


def parse_nvml_reads(node: str, text: str) -> tuple[list[CounterRead], list[PowerSample]]:
    """The counter reads and power samples of one node's :data:`NVML_READ_SCRIPT` output. A GPU
    without the counter gives no read (the window's energy then says which GPU is missing)."""
    line = next((ln for ln in reversed(text.strip().splitlines()) if ln.startswith("{")), "")
    try:
        data = json.loads(line)
        t = float(data["t_wall_s"])
        gpus = list(data["gpus"])
    except (ValueError, KeyError, TypeError) as exc:
        raise PowerParseError(
            f"{node}: expected one JSON line of NVML reads, found {text.strip()[-200:]!r}"
        ) from exc
    reads, samples = [], []
    for g in gpus:
        gpu = f"{node}:{g['index']}"
        if g.get("energy_mj") is not None:
            reads.append(CounterRead(gpu, t, int(g["energy_mj"])))
        if g.get("power_mw") is not None:
            samples.append(PowerSample(gpu, t, int(g["power_mw"]) / 1000.0))
    return reads, samples


def parse_counter_step(text: str) -> tuple[float | None, float]:
    """What the read says of its own clock, where it says it (the emulator's does, sim/smi.py):
    the counter's update interval in wall seconds (None: real NVML cannot tell, and
    measure/energy.py takes the H100's measured step) and the time scale (its counter's joules
    are power times emulated seconds, ``time_scale`` per wall second; 1 on real GPUs)."""
    line = next((ln for ln in reversed(text.strip().splitlines()) if ln.startswith("{")), "")
    try:
        data = json.loads(line)
        step, scale = data.get("counter_step_s"), data.get("time_scale", 1.0)
    except (ValueError, AttributeError):
        return None, 1.0
    ok_step = float(step) if isinstance(step, int | float) and step > 0 else None
    return ok_step, float(scale) if isinstance(scale, int | float) and scale > 0 else 1.0


def _smi_time(value: str) -> float:
    # nvidia-smi prints the node's local time without a zone; the nodes here keep UTC.
    return datetime.strptime(value.strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def parse_smi_power_csv(node: str, text: str, field: str = "power.draw") -> list[PowerSample]:
    """``nvidia-smi --query-gpu=timestamp,index,...,power.draw,... --format=csv [-lms N]`` as
    samples of ``field`` (``power.draw``, ``power.draw.average`` or ``power.draw.instant``).
    Rows whose value is ``[N/A]`` or missing give no sample; a header without ``timestamp``,
    ``index`` or ``field`` is refused naming what it has."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise PowerParseError(f"{node}: nvidia-smi printed nothing (expected a CSV with a header)")
    header = [h.strip().split(" [", 1)[0] for h in lines[0].split(",")]
    missing = [k for k in ("timestamp", "index", field) if k not in header]
    if missing:
        raise PowerParseError(
            f"{node}: nvidia-smi's CSV has no {', '.join(missing)} column (expected "
            f"timestamp, index and {field}; found {', '.join(header)})"
        )
    ti, ii, fi = header.index("timestamp"), header.index("index"), header.index(field)
    out = []
    for no, line in enumerate(lines[1:], 2):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(header):
            raise PowerParseError(
                f"{node}: nvidia-smi's CSV line {no} has {len(cells)} cells, expected "
                f"{len(header)}: {line!r}"
            )
        value = cells[fi].removesuffix(" W").strip()
        if not value or value.startswith("[") or value == "N/A":
            continue
        try:
            out.append(PowerSample(f"{node}:{cells[ii]}", _smi_time(cells[ti]), float(value)))
        except ValueError as exc:
            raise PowerParseError(f"{node}: nvidia-smi's CSV line {no}: {exc}") from exc
    return out
