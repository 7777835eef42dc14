"""``nvidia-smi`` shim: ``python3 -m pytest_ppsweep.sim.smi --host <addr> [nvidia-smi args]``.

Prints what nvidia-smi would print on the emulated node ``<addr>``, byte-for-byte in the
format of real captures, e.g. ``--query-gpu=index,memory.used,memory.total --format=csv``::

    index, memory.used [MiB], memory.total [MiB]
    0, 20385 MiB, 85651 MiB

Supported: ``-q`` (the fields ``comm/smiq.py`` reads), ``topo -m``, ``--query-gpu=<fields>``,
``--query-compute-apps=<fields>``, ``--format=csv[,noheader][,nounits]``, ``-i/--id``,
``-L/--list-gpus`` (also the default without a query), and ``--nvml-energy``: not an
nvidia-smi option but what the NVML read a real node runs (cluster/power.py) prints, one JSON
line per node, from the emulator's power model (:func:`nvml_reads`). Memory comes from the
state file the node's rank publishes (sim/launch/gpustate.py); without one the GPUs are idle.

``--host a,b,…`` (several nodes of one machine, the plugin's ``{hosts}``) prints each node's
output after a line ``==> <addr> <==``: one interpreter for a whole loopback cluster.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .launch.gpustate import GPU_FACTS, gpu_facts, read_state, state_dir_of

TYPE_CHECKING = False  # typing's, without importing typing (see gpustate)
if TYPE_CHECKING:
    from .model.profile import Profile

PROCESS_UNATTRIBUTED_MIB = 9  # driver reservation nvidia-smi does not charge to the process


class Gpu:
    """One emulated GPU as nvidia-smi sees it (a plain class: dataclasses imports inspect, a
    sixth of the start of this interpreter-per-call shim)."""

    __slots__ = ("bus_id", "count", "driver", "host", "index", "name", "pid", "total_mib",
                 "used_mib", "util")

    def __init__(self, *, index: int, name: str, host: str, bus_id: str, used_mib: int,
                 total_mib: int, driver: str, util: int, pid: int | None, count: int = 8) -> None:
        self.index, self.name, self.host, self.bus_id = index, name, host, bus_id
        self.used_mib, self.total_mib, self.driver = used_mib, total_mib, driver
        self.util, self.pid, self.count = util, pid, count

    @property
    def uuid(self) -> str:
        return _uuid(self.host, self.index)


def _uuid(host: str, index: int) -> str:
    # hashlib (OpenSSL) is imported only by a query that shows UUIDs: the shim starts an
    # interpreter per call, and the GPU snapshots ask for memory only
    import hashlib

    h = hashlib.sha1(f"{host}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _load_profile(name: str) -> Profile:
    # Imported on use: the profile (tomllib, a dozen dataclasses) is a fifth of the shim's start,
    # and the state file of a busy node says all the shim shows (GPU_FACTS).
    from .model.profile import load_profile

    return load_profile(name)


def node_gpus(host: str, state_dir: Path, profile_name: str) -> list[Gpu]:
    """The GPUs of ``host`` with their current memory use: the state its rank publishes, the
    profile's ``[gpu]`` facts for what the state does not say (an idle node has none)."""
    state = read_state(state_dir, host)
    busy = state is not None and "pid" in state
    # a busy node's facts are its rank's; an idle node's are the asked profile's (those an
    # exited rank left stand for them only if that rank ran the same profile)
    info = dict(state) if state is not None and (
        busy or state.get("profile") == profile_name) else {}
    if any(fact not in info for fact in GPU_FACTS):
        info = {**gpu_facts(_load_profile(profile_name).gpu), **info}
    count = int(info["gpu_count"])
    used = {int(g["index"]): int(g["used_mib"]) for g in info.get("gpus", [])}
    idle = int(info["idle_used_mib"])
    pid = int(info["pid"]) if busy else None
    return [
        Gpu(
            index=i,
            name=str(info["gpu_name"]),
            host=host,
            bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            used_mib=used.get(i, idle),
            total_mib=int(info["memory_total_mib"]),
            driver=str(info["driver_version"]),
            util=int(info.get("utilization_gpu", 0)) if i in used else 0,
            pid=pid if i in used else None,
            count=count,
        )
        for i in range(count)
    ]


def _mib(v: int) -> str:
    return f"{v} MiB"


# field -> (header, unit or "", value function returning the text with its unit)
GPU_FIELDS: dict[str, tuple[str, str, Callable[[Gpu], str]]] = {
    "index": ("index", "", lambda g: str(g.index)),
    "name": ("name", "", lambda g: g.name),
    "gpu_name": ("name", "", lambda g: g.name),
    "uuid": ("uuid", "", lambda g: g.uuid),
    "gpu_uuid": ("uuid", "", lambda g: g.uuid),
    "pci.bus_id": ("pci.bus_id", "", lambda g: g.bus_id),
    "driver_version": ("driver_version", "", lambda g: g.driver),
    "count": ("count", "", lambda g: str(g.count)),
    "memory.total": ("memory.total", "MiB", lambda g: _mib(g.total_mib)),
    "memory.used": ("memory.used", "MiB", lambda g: _mib(g.used_mib)),
    "memory.free": ("memory.free", "MiB", lambda g: _mib(g.total_mib - g.used_mib)),
    "utilization.gpu": ("utilization.gpu", "%", lambda g: f"{g.util} %"),
    "utilization.memory": ("utilization.memory", "%", lambda g: "0 %"),
    "temperature.gpu": ("temperature.gpu", "", lambda g: "39" if g.pid is None else "52"),
    "power.draw": ("power.draw", "W", lambda g: "61.00 W" if g.pid is None else "121.00 W"),
    "compute_mode": ("compute_mode", "", lambda g: "Default"),
    "persistence_mode": ("persistence_mode", "", lambda g: "Enabled"),
}
APP_FIELDS: dict[str, tuple[str, str, Callable[[Gpu], str]]] = {
    "pid": ("pid", "", lambda g: str(g.pid)),
    "process_name": ("process_name", "", lambda g: "python3"),
    "name": ("process_name", "", lambda g: "python3"),
    "used_memory": (
        "used_gpu_memory",
        "MiB",
        lambda g: _mib(max(g.used_mib - PROCESS_UNATTRIBUTED_MIB, 0)),
    ),
    "used_gpu_memory": (
        "used_gpu_memory",
        "MiB",
        lambda g: _mib(max(g.used_mib - PROCESS_UNATTRIBUTED_MIB, 0)),
    ),
    "gpu_uuid": ("gpu_uuid", "", lambda g: g.uuid),
    "gpu_bus_id": ("gpu_bus_id", "", lambda g: g.bus_id),
    "gpu_name": ("gpu_name", "", lambda g: g.name),
}


def render_query(
    gpus: list[Gpu],
    fields: list[str],
    table: dict[str, tuple[str, str, Callable[[Gpu], str]]],
    fmt: set[str],
) -> str:
    """CSV output of a query."""
    lines: list[str] = []
    if "noheader" not in fmt:
        lines.append(
            ", ".join(
                f"{table[f][0]} [{table[f][1]}]" if table[f][1] else table[f][0] for f in fields
            )
        )
    for gpu in gpus:
        values = []
        for f in fields:
            text = table[f][2](gpu)
            unit = table[f][1]
            if "nounits" in fmt and unit and text.endswith(" " + unit):
                text = text[: -len(unit) - 1]
            values.append(text)
        lines.append(", ".join(values))
    return "".join(line + "\n" for line in lines)


def render_topo(gpus: int, per_island: int) -> str:
    """``nvidia-smi topo -m`` of a node without NVLink (the profile's [gpu] section): GPUs of one
    PCIe/NUMA island of ``per_island`` GPUs see each other through PCIe bridges (``PIX``), GPUs of
    different islands across the SMP interconnect (``SYS``); island i is NUMA node i. The
    layout of the text (tabs, the underlined header, the legend) is the real capture's
    (tests/data/topo.txt)."""
    per = max(per_island, 1)
    islands = max((gpus + per - 1) // per, 1)
    cores = 16
    head = "".join(f"\tGPU{i}" for i in range(gpus))
    lines = [f"\t\x1b[4m{head.lstrip(chr(9))}\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m"]
    for a in range(gpus):
        cells = [" X " if a == b else ("PIX" if a // per == b // per else "SYS")
                 for b in range(gpus)]
        isl = a // per
        lines.append(f"GPU{a}\t" + "\t".join(cells)
                     + f"\t{isl * cores}-{isl * cores + cores - 1}\t{isl}\t\tN/A")
    legend = [
        "", "Legend:", "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
        "(e.g., QPI/UPI)",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
        "Bridges within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
        "Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
    ]
    assert islands >= 1
    return "\n".join(lines + legend) + "\n"


def render_q(gpus: list[Gpu]) -> str:
    """``nvidia-smi -q`` of a node: the layout of a real capture (tests/data/h200-1gpu/
    smi-q.txt), with the sections and fields the comm step reads (comm/smiq.py)."""
    def row(indent: int, key: str, value: str | None = None) -> str:
        pad = " " * (4 * indent)
        return pad + key if value is None else f"{pad}{key:<{55 - len(pad)}}: {value}"

    driver = gpus[0].driver if gpus else "N/A"
    lines = ["", "==============NVSMI LOG==============", "",
             row(0, "Timestamp", "Thu Jan  1 00:00:00 1970"), row(0, "Driver Version", driver),
             row(0, "CUDA Version", "N/A (emulated)"), "",
             row(0, "Attached GPUs", str(len(gpus)))]
    for g in gpus:
        lines += [f"GPU {g.bus_id}", row(1, "Product Name", g.name),
                  row(1, "Persistence Mode", "Enabled"), row(1, "MIG Mode"),
                  row(2, "Current", "Disabled"), row(2, "Pending", "Disabled"),
                  row(1, "GPU UUID", g.uuid), row(1, "PCI"), row(2, "Bus Id", g.bus_id),
                  row(1, "FB Memory Usage"), row(2, "Total", _mib(g.total_mib)),
                  row(2, "Used", _mib(g.used_mib)),
                  row(2, "Free", _mib(g.total_mib - g.used_mib)),
                  row(1, "Fabric"), row(2, "State", "N/A")]
    return "\n".join(lines) + "\n\n"


# The emulated energy counter's zero: the node's "driver load" (any fixed instant will do: only
# differences of two reads are energy, and the counter then fits easily in NVML's 64 bits).
COUNTER_EPOCH_WALL_S = 1_700_000_000.0


def nvml_reads(host: str, state_dir: Path, profile_name: str, default_scale: float,
               now_wall: float) -> dict[str, object]:
    """What ``cluster/power.py``'s NVML read prints on the node ``host``, from the emulator's own
    model of its GPUs (profile ``[power]``): each GPU's total-energy counter is idle watts over
    the emulated time since :data:`COUNTER_EPOCH_WALL_S` plus the busy extra (busy - idle watts)
    over the GPU's busy emulated seconds (its stage's micro-batch steps, as its rank last
    published them), in mJ, moving only every ``counter_step_ms`` of emulated time; its power the
    idle or busy watts by the published utilisation. Emulated time is wall time times the time
    scale, so the counter's energy is the modelled hardware's, not the emulator's; the JSON also
    says the counter's step in wall seconds (``counter_step_s``: the real script cannot know it)
    and the time scale (its joules are the modelled ones: power times emulated seconds).
    """
    state = read_state(state_dir, host) or {}
    power = _load_profile(str(state.get("profile") or profile_name)).power
    scale = float(state.get("time_scale") or default_scale)
    step = power.counter_step_ms / 1000.0
    emulated = (now_wall - COUNTER_EPOCH_WALL_S) * scale
    stepped = int(emulated / step + 1e-9) * step  # (1e-9: 0.3 / 0.1 is one step short)
    busy = {str(k): float(v) for k, v in dict(state.get("busy_s") or {}).items()}
    util = int(state.get("utilization_gpu", 0)) if "pid" in state else 0
    gpus = []
    for g in node_gpus(host, state_dir, profile_name):
        joules = power.idle_w * stepped + (power.busy_w - power.idle_w) * busy.get(
            str(g.index), 0.0)
        watts = power.idle_w + (power.busy_w - power.idle_w) * (util / 100 if g.pid else 0)
        gpus.append({"index": g.index, "energy_mj": int(joules * 1000),
                     "power_mw": int(watts * 1000)})
    return {"t_wall_s": now_wall, "counter_step_s": step / scale, "time_scale": scale,
            "gpus": gpus}


def _help_formatter(prog: str) -> argparse.HelpFormatter:
    # A fixed width: for the terminal's, argparse imports shutil (and zlib, bz2, lzma with it),
    # a twentieth of the start of a shim that runs as an interpreter per call.
    return argparse.HelpFormatter(prog, width=100)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the shim."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "-q" in args and "--host" in args:  # `nvidia-smi -q` of the node --host names
        host = args[args.index("--host") + 1].split(",")[0].strip()
        state_dir = state_dir_of(os.environ)
        profile = os.environ.get("PPSWEEP_SIM_PROFILE") or "kimi-k3-6000d"
        sys.stdout.write(render_q(node_gpus(host, state_dir, profile)))
        return 0
    if "--nvml-energy" in args and "--host" in args:  # the NVML read (cluster/power.py)
        import json
        import time

        from .launch.settings import DEFAULT_TIME_SCALE

        hosts = [h.strip() for h in args[args.index("--host") + 1].split(",") if h.strip()]
        state_dir = state_dir_of(os.environ)
        profile = os.environ.get("PPSWEEP_SIM_PROFILE") or "kimi-k3-6000d"
        scale = float(os.environ.get("PPSWEEP_SIM_TIME_SCALE") or DEFAULT_TIME_SCALE)
        for host in hosts:
            text = json.dumps(nvml_reads(host, state_dir, profile, scale, time.time()))
            sys.stdout.write(f"==> {host} <==\n{text}\n" if len(hosts) > 1 else text + "\n")
        return 0
    if "topo" in args and "-m" in args:  # `nvidia-smi topo -m` (the shim's --host still given)
        prof = _load_profile(os.environ.get("PPSWEEP_SIM_PROFILE") or "kimi-k3-6000d")
        sys.stdout.write(render_topo(prof.gpu.gpus_per_node, prof.gpu.gpus_per_pcie_island))
        return 0
    p = argparse.ArgumentParser(prog="nvidia-smi", add_help=True, formatter_class=_help_formatter)
    p.add_argument(
        "--host", required=True, help="node address (the rank's --host); several: a,b,…"
    )
    p.add_argument("--query-gpu", default=None)
    p.add_argument("--query-compute-apps", default=None)
    p.add_argument("--format", default=None)
    p.add_argument("-i", "--id", default=None)
    p.add_argument("-L", "--list-gpus", action="store_true")
    ns = p.parse_args(argv)
    hosts = [h.strip() for h in str(ns.host).split(",") if h.strip()]
    if len(hosts) <= 1:
        return node_main(ns, hosts[0] if hosts else "")
    for host in hosts:  # the query is checked on the first node: none prints a partial answer
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = node_main(ns, host)
        if rc != 0:
            sys.stdout.write(out.getvalue())
            return rc
        sys.stdout.write(f"==> {host} <==\n{out.getvalue()}")
    return 0


def node_main(ns: argparse.Namespace, host: str) -> int:
    """What nvidia-smi prints on the node ``host`` for the parsed arguments ``ns``."""
    state_dir = state_dir_of(os.environ)
    profile = os.environ.get("PPSWEEP_SIM_PROFILE") or "kimi-k3-6000d"
    gpus = node_gpus(host, state_dir, profile)
    if ns.id is not None:
        wanted = {int(x) for x in str(ns.id).split(",")}
        gpus = [g for g in gpus if g.index in wanted]
    query, table = (
        (ns.query_gpu, GPU_FIELDS) if ns.query_gpu else (ns.query_compute_apps, APP_FIELDS)
    )
    if query is None:
        sys.stdout.write("".join(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n" for g in gpus))
        return 0
    fmt = {x.strip() for x in (ns.format or "").split(",") if x.strip()}
    if "csv" not in fmt:
        sys.stdout.write('"--format" must be specified with "csv".\n')
        return 2
    fields = [f.strip() for f in query.split(",") if f.strip()]
    for f in fields:
        if f not in table:
            sys.stdout.write(f'Field "{f}" is not a valid field to query.\n\n')
            return 2
    if table is APP_FIELDS:
        gpus = [g for g in gpus if g.pid is not None]
    sys.stdout.write(render_query(gpus, fields, table, fmt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
