"""The ``[comm]`` table of a sweep file: the all-reduce microbenchmark per TP domain (seeds §9.2).

Keys (all optional; the table itself enables ``test_comm``, as ``--ppsweep-comm`` does):

| key | meaning | default |
|---|---|---|
| ``min_size``, ``max_size`` | sizes swept, doubling (bytes, or ``"1K"``, ``"256M"``) | 1K, 256M |
| ``sizes`` | an explicit list instead (same units) | |
| ``warmup_iters``, ``iters`` | untimed and timed all-reduces per size | 5, 20 |
| ``backend`` | ``auto`` (NCCL with CUDA, else gloo), ``nccl``, ``gloo`` | auto |
| ``timeout_s`` | bounded wait: no progress for this long on a rank fails the domain | 300 |
| ``tool`` | ``torch`` (the shipped worker) or ``nccl-tests`` | torch |
| ``all_reduce_perf`` | path of nccl-tests' binary on the nodes (``tool = "nccl-tests"``) | |
| ``mpirun`` | argv prefix that starts ``all_reduce_perf`` across nodes | |
| ``master_port`` | rendezvous port of the worker on node 0 | dist_init_port + 1 |
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_ppsweep.matrix.schema import MatrixError, Reader, shown_value

__all__ = ["COMM_KEYS", "COMM_TOOLS", "CommSpec", "parse_size", "read_comm", "size_label"]

COMM_KEYS = (
    "min_size",
    "max_size",
    "sizes",
    "warmup_iters",
    "iters",
    "backend",
    "timeout_s",
    "tool",
    "all_reduce_perf",
    "mpirun",
    "master_port",
)
COMM_TOOLS = ("torch", "nccl-tests")
COMM_BACKENDS = ("auto", "nccl", "gloo")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
_SIZE = re.compile(r"\s*(\d+)\s*([A-Za-z]*)\s*")
MAX_BYTES = 1 << 34  # 16 GiB: beyond any GPU's all-reduce buffer worth sweeping
DTYPE_BYTES = 4  # the worker sweeps float32, as nccl-tests does by default


@dataclass(frozen=True)
class CommSpec:
    """What ``test_comm`` runs on each TP domain of a layout."""

    sizes: tuple[int, ...] = tuple(1024 << i for i in range(19))  # 1 KiB … 256 MiB
    warmup_iters: int = 5
    iters: int = 20
    backend: str = "auto"
    timeout_s: float = 300.0
    tool: str = "torch"
    all_reduce_perf: str = ""
    mpirun: tuple[str, ...] = ()
    master_port: int = 0  # 0: the cluster's dist_init_port + 1


def parse_size(value: object, where: str) -> int:
    """``4096``, ``"4K"``, ``"256M"``, ``"1G"`` → bytes; anything else names ``where``."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and (m := _SIZE.fullmatch(value)) and m[2].upper() in _UNITS:
        n = int(m[1]) * _UNITS[m[2].upper()]
    else:
        raise MatrixError(
            f"{where}: expected a size in bytes or with a unit (B, K, M, G; e.g. \"1K\", "
            f"\"256M\"), found {shown_value(value)}"
        )
    if n < DTYPE_BYTES or n % DTYPE_BYTES or n > MAX_BYTES:
        raise MatrixError(
            f"{where}: expected a multiple of {DTYPE_BYTES} bytes (float32) between "
            f"{DTYPE_BYTES} B and 16G, found {shown_value(value)}"
        )
    return n


def size_label(n: int) -> str:
    """1024 → ``1K``, 134217728 → ``128M`` (nccl-tests' -b/-e spelling)."""
    for unit, mult in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n}B"


def read_comm(top: Reader) -> CommSpec | None:
    """The ``[comm]`` table, validated; None when the file has none."""
    if "comm" not in top.data:
        return None
    c = top.table("comm")
    c.only(COMM_KEYS)

    def key(name: str) -> str:
        return f"{c.path}: key 'comm.{name}'"

    if "sizes" in c.data:
        raw = c.raw("sizes")
        if "min_size" in c.data or "max_size" in c.data:
            raise MatrixError(f"{key('sizes')}: expected either sizes or min_size/max_size, "
                              "found both")
        if not isinstance(raw, list) or not raw:
            raise MatrixError(f"{key('sizes')}: expected a non-empty list of sizes, found "
                              f"{shown_value(raw)}")
        sizes = tuple(sorted({parse_size(v, key(f"sizes[{i}]")) for i, v in enumerate(raw)}))
    else:
        low = parse_size(c.raw("min_size") if "min_size" in c.data else 1024, key("min_size"))
        high = parse_size(c.raw("max_size") if "max_size" in c.data else 256 << 20,
                          key("max_size"))
        if high < low:
            raise MatrixError(f"{key('max_size')}: expected at least min_size ({low} B), found "
                              f"{high} B")
        out = [low]
        while out[-1] * 2 <= high:
            out.append(out[-1] * 2)
        sizes = tuple(out)
    tool = c.choice("tool", COMM_TOOLS, default="torch")
    perf = c.text("all_reduce_perf", default="")
    if tool == "nccl-tests" and not perf:
        raise MatrixError(f"{key('all_reduce_perf')}: expected the path of nccl-tests' "
                          "all_reduce_perf on the nodes (tool = \"nccl-tests\"), found nothing")
    return CommSpec(
        sizes=sizes,
        warmup_iters=c.integer("warmup_iters", default=5, minimum=0, maximum=10_000),
        iters=c.integer("iters", default=20, minimum=1, maximum=100_000),
        backend=c.choice("backend", COMM_BACKENDS, default="auto"),
        timeout_s=c.number("timeout_s", default=300.0, minimum=0.5),
        tool=tool,
        all_reduce_perf=perf,
        mpirun=tuple(c.str_list("mpirun", default=[])),
        master_port=c.integer("master_port", default=0, minimum=1, maximum=65535),
    )
