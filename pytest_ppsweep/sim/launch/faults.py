"""Fault injection, chosen per configuration through ``PPSWEEP_SIM_FAULTS``.

The value is a comma-separated list of ``name[=value][@rank=N|@node=N]`` items (``@node`` is a
synonym: one rank per node). Without a qualifier a fault applies where the description says.
Every fault prints SGLang's real log lines (see sim/launch/faultlog.py) and exits non-zero where
SGLang would; the other ranks then lose their connection to rank 0 and exit too.

``nccl_init``            NCCL communicator init fails (``NCCL error in: ... ncclInternalError``)
                         right after ``Init torch distributed begin.``; all ranks by default.
``oom_load``             ``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...``
                         during weight loading; all ranks by default.
``custom_ar_graph``      custom all-reduce IPC registration fails during decode CUDA-graph
                         capture (``Capture cuda graph failed: ... custom_all_reduce.cuh:350
                         ... invalid argument``); fires only when the decode graph is enabled
                         (not with ``--disable-cuda-graph`` / ``--disable-decode-cuda-graph``).
                         The seeds' first PP16 failure. All ranks by default.
``watchdog_hang[=S]``    the warmup forward on rank 0 hangs for ``S`` emulated seconds
                         (default 420). If ``--watchdog-timeout`` is shorter, the scheduler
                         watchdog fires at that timeout (``Scheduler watchdog timeout
                         (self.watchdog_timeout=300, self.soft=False)`` + SIGQUIT lines) and the
                         rank exits; otherwise the warmup proceeds after ``S`` (the seeds'
                         second PP16 failure, then ``--watchdog-timeout 3000000`` fixing it).
``crash_mid_bench=N``    a rank >= 1 (default the last rank; ``@rank=R`` to choose) dies after
                         rank 0 completed ``N`` requests; rank 0 and the others then exit.
``fail_requests=F``      a seeded fraction ``F`` of requests fail on rank 0: non-streaming ones
                         with HTTP 500 ``{"error": {...}}``; streaming ones either with HTTP 500
                         or with an error object inside the 200 stream (seeded coin).
``fail_request_n=N``     the ``N``-th request rank 0 receives (from 1, counting every request
                         of the boot, warm-up ones included) fails with HTTP 500, and no other
                         (repeat the item for more): one round misses N/N once, deterministically
                         (the replacement round of results/replace.py then succeeds).
``wrong_topology``       ``/server_info`` reports a different tp/pp/ep than launched.
``never_join=R``         rank ``R`` never reaches the rendezvous; rank 0 fails after the
                         distributed timeout (``--dist-timeout`` or 600 emulated seconds).
``slow_start=S``         the rank starts ``S`` emulated seconds late (before joining); all ranks
                         by default, ``@rank=N`` for one.
``escape_child``         the rank starts a child in its own session (``setsid``, as daemons and
                         some launchers do; it keeps the rank's environment) that sleeps until
                         killed: stopping the rank's process group does not reach it. All ranks
                         by default, ``@rank=N`` for one.
``profile_missing``      the profile window writes no trace on one node (``@node=N``; default
                         the last node): its rank files are missing (sim/http/api_profile.py).
``corrupt_stage=K``      PP stage ``K`` computes a wrong output (a dropped layer, a broken kernel):
                         the greedy answer of ``/generate`` with ``return_logprob`` differs from
                         every other layout's from the first token on (sim/model/greedy.py),
                         and so does its temperature-0 ``/v1/completions`` text: its task
                         accuracy drops (the ``[accuracy]`` check).
                         A layout without stage ``K`` (pp ≤ K) is not affected; ``0`` corrupts
                         every layout (a bad image). The rank boots and serves as usual.

Example: ``PPSWEEP_SIM_FAULTS="fail_requests=0.1,crash_mid_bench=20@rank=2"``.
"""

from __future__ import annotations

from dataclasses import dataclass

KNOWN = {
    "nccl_init": False,
    "oom_load": False,
    "custom_ar_graph": False,
    "watchdog_hang": None,
    "crash_mid_bench": True,
    "fail_requests": True,
    "fail_request_n": True,
    "wrong_topology": False,
    "never_join": True,
    "slow_start": True,
    "profile_missing": False,
    "escape_child": False,
    "corrupt_stage": True,
}  # name -> value required (True), forbidden (False) or optional (None)
DEFAULT_HANG_S = 420.0


class FaultSpecError(ValueError):
    """PPSWEEP_SIM_FAULTS could not be parsed."""


@dataclass(frozen=True)
class Fault:
    """One injected fault."""

    name: str
    value: str | None = None
    rank: int | None = None

    def number(self, default: float = 0.0) -> float:
        """The value as a number (``default`` when absent)."""
        return float(self.value) if self.value is not None else default

    def __str__(self) -> str:
        text = self.name if self.value is None else f"{self.name}={self.value}"
        return text if self.rank is None else f"{text}@rank={self.rank}"


@dataclass(frozen=True)
class FaultSet:
    """All faults of one run."""

    faults: tuple[Fault, ...] = ()

    def get(self, name: str, rank: int | None = None) -> Fault | None:
        """The fault ``name`` if it applies to ``rank`` (``None``: regardless of rank)."""
        for fault in self.faults:
            if fault.name != name:
                continue
            if rank is None or fault.rank is None or fault.rank == rank:
                return fault
        return None

    def labels(self) -> list[str]:
        """Canonical text of each fault (for ``/server_info``)."""
        return [str(f) for f in self.faults]


def _parse_item(item: str) -> Fault:
    head, *quals = item.split("@")
    name, eq, value = head.partition("=")
    name = name.strip()
    if name not in KNOWN:
        raise FaultSpecError(f"unknown fault {name!r} (known: {', '.join(sorted(KNOWN))})")
    need = KNOWN[name]
    if need is True and not eq:
        raise FaultSpecError(f"fault {name!r} needs a value ({name}=...)")
    if need is False and eq:
        raise FaultSpecError(f"fault {name!r} takes no value")
    rank: int | None = None
    for qual in quals:
        key, _, num = qual.partition("=")
        if key.strip() not in ("rank", "node") or not num.strip().isdigit():
            raise FaultSpecError(f"bad qualifier @{qual!r} in {item!r} (use @rank=N or @node=N)")
        rank = int(num)
    if eq:
        try:
            float(value)
        except ValueError as exc:
            raise FaultSpecError(f"fault {name!r}: value {value!r} is not a number") from exc
    return Fault(name, value.strip() if eq else None, rank)


def parse_faults(spec: str | None) -> FaultSet:
    """Parse a ``PPSWEEP_SIM_FAULTS`` value (empty/None: no faults)."""
    if not spec or not spec.strip():
        return FaultSet()
    return FaultSet(tuple(_parse_item(item.strip()) for item in spec.split(",") if item.strip()))
