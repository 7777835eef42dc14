"""Who listens on a TCP port of this machine: ``/proc/net/tcp{,6}`` LISTEN sockets matched to
the processes holding them (``/proc/<pid>/fd`` → ``socket:[inode]``).

Preflight names the owner of a busy port with it (pid, command line, the ``PPSWEEP_RUN`` label
of a rank of an earlier run), and readiness proves that the server answering on a rank's port
is the process it launched (a process of the rank's process group holds the listening socket),
not a leftover of an earlier run answering on the same port.

Only this machine is looked at (local clusters); a process of another user whose descriptors
cannot be read is a listener without an owner (``pid`` None).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_ppsweep.cluster.labels import RUN_ENV

__all__ = ["Listener", "group_of", "listeners", "owned_by_group"]

_LISTEN = "0A"
_WILDCARDS = ("0.0.0.0", "::")


@dataclass(frozen=True)
class Listener:
    """One listening socket on ``address:port`` and, where visible, its process."""

    address: str
    port: int
    inode: int
    pid: int | None = None
    cmdline: str = ""
    run: str = ""  # the PPSWEEP_RUN label of the owner (a rank of a ppsweep run)
    uid: int | None = None  # the owner's user

    @property
    def reapable(self) -> bool:
        """A rank of a ppsweep run of this user: what ``--ppsweep-reap`` may remove (another
        user's process, or one that is no rank, is not this run's to remove)."""
        return bool(self.run) and self.uid == os.getuid()

    def describe(self) -> str:
        if self.pid is None:
            return "a process this user cannot see"
        run = f", a rank of run {self.run}" if self.run else ""
        cmd = self.cmdline if len(self.cmdline) <= 160 else self.cmdline[:157] + "..."
        return f"pid {self.pid} ({cmd}){run}"


def _decode(hex_addr: str) -> tuple[str, int]:
    addr, port = hex_addr.split(":")
    raw = bytes.fromhex(addr)
    if len(raw) == 4:
        ip = ipaddress.IPv4Address(raw[::-1])
        return str(ip), int(port, 16)
    # IPv6: four 32-bit words, each little-endian
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    ip6 = ipaddress.IPv6Address(words)
    mapped = ip6.ipv4_mapped
    return (str(mapped) if mapped else str(ip6)), int(port, 16)


def _sockets(port: int) -> list[tuple[str, int]]:
    """(address, inode) of every LISTEN socket on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != _LISTEN:
                continue
            address, p = _decode(cols[1])
            if p == port:
                found.append((address, int(cols[9])))
    return found


def _holders(inodes: Iterable[int]) -> dict[int, int]:
    """inode → pid of a process holding it (the first found)."""
    wanted = {f"socket:[{i}]": i for i in inodes}
    out: dict[int, int] = {}
    if not wanted:
        return out
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target in wanted and wanted[target] not in out:
                out[wanted[target]] = int(entry.name)
        if len(out) == len(wanted):
            break
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _run_label(pid: int) -> str:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    prefix = f"{RUN_ENV}=".encode()
    return next((e[len(prefix) :].decode() for e in environ if e.startswith(prefix)), "")


def _matches(address: str, wanted: str | None) -> bool:
    return wanted is None or address == wanted or address in _WILDCARDS


def listeners(port: int, address: str | None = None) -> list[Listener]:
    """Every process listening on ``port`` (of ``address``, a wildcard bind included)."""
    socks = [(a, i) for a, i in _sockets(port) if _matches(a, address)]
    holders = _holders(i for _a, i in socks)
    out = []
    for addr, inode in socks:
        pid = holders.get(inode)
        out.append(
            Listener(addr, port, inode, pid, _cmdline(pid) if pid else "",
                     _run_label(pid) if pid else "", _uid(pid) if pid else None)
        )
    return out


def _uid(pid: int) -> int | None:
    try:
        return Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        return None


def group_of(pid: int) -> tuple[int, int] | None:
    """(process group, session) of ``pid``, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[2]), int(fields[3])


def owned_by_group(address: str, port: int, pgid: int) -> bool | None:
    """Whether the socket listening on ``address:port`` is held by a process of the process
    group (or session) ``pgid``: True, False (another process holds it), or None (nothing
    listens there, or its holder cannot be seen)."""
    found = listeners(port, address)
    if not found:
        return None
    unknown = False
    for item in found:
        if item.pid is None:
            unknown = True
            continue
        group = group_of(item.pid)
        if group is not None and pgid in group:
            return True
    return None if unknown else False
