"""One sweep per cluster at a time: a claim (a lease with a heartbeat) on every node of it.

Two sweeps on the same nodes corrupt each other's measurements, and between two layouts of a run
nothing is bound, so a port check alone cannot see the other run. Before its preflight a run
takes the cluster's claim: one small JSON file per node, on that node
(``CLAIM_DIR/<node address>.json``, written through the node's command host: ``sh`` locally,
over SSH or as a Slurm step otherwise), naming the run id, user, host, pid and start time. The
claim is keyed on the cluster's *set of nodes*: each node's address resolved (a host name and
its IP are one node), sorted, so two clusters that share any node meet there, whatever name,
node order or subset each sweep file has. All of the files are taken, in that order, or none
(a busy node gives back those taken). A thread touches them every ``heartbeat_s`` while the
run holds them; a file's modification time, read with the node's own clock, is the heartbeat. A
second run waits for it (``wait_s``) or is refused before anything is launched:

    cluster 'prod' is in use by run kimi3-pp-20261201-093100 of alice@h601 since 09:31
    (heartbeat 3 s ago)

A claim whose heartbeat is older than ``stale_s`` belongs to a dead run (killed, its machine
gone), and so does one whose holder ran on this very host in a process that no longer exists
(a killed pytest): it is taken over, with a warning. Every change is a compare-and-swap under
``flock`` on the node (the content read before must still be there), written in place: so two
runs that start together cannot both win, and another user can take over a dead run's claim.
``CLAIM_DIR`` is made mode 0777 without the sticky bit, each file and lock 0666 (in a sticky
directory only a file's owner may replace or remove it). A run whose claim was taken over
finds out at its next heartbeat (``lost``, ``lost_since``: the last heartbeat that still found
it its own, and ``on_lost``, which the session uses to mark what was measured since INVALID).
A cluster whose nodes change during the run (a Slurm allocation renewed before a layout:
``Backend.before_layout``) takes its claim along (:meth:`Claim.move`): the new nodes are claimed
through the new allocation and the heartbeat goes on there; a node left behind that can no
longer be asked (its allocation is gone) keeps its file, which goes stale and is taken over.

This is the cluster-level lock, across pytest sessions; ``pytest_ppsweep.pool.lease`` hands
the clusters of one session's pool to its xdist workers, on top of it (the controller claims
every cluster of the pool, the workers claim nothing).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pytest_ppsweep.cluster.backends import host_for
from pytest_ppsweep.cluster.base import CommandHost, HostError
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Cluster, Host

__all__ = ["CLAIM_DIR", "CLAIM_DIR_MODE", "Claim", "ClusterBusy", "Holder",
           "busy_message", "claim_all", "node_keys", "process_gone"]

CLAIM_DIR = "/tmp/ppsweep-claims"
CLAIM_DIR_MODE = "0777"  # no sticky bit: another user may take a dead run's claim over
# The run folder's record of claims lost mid-run (the session writes it, results/verdict.py
# marks the rounds measured since INVALID): {cluster: {"since": epoch of the last heartbeat
# that found the claim this run's, "why": who took it over}}.
HEARTBEAT_S = 5.0
STALE_S = 60.0  # no heartbeat for this long: the holder is dead
POLL_S = 1.0

# $1 op (read | put | touch | drop), $2 file stem, $3 the content expected there now ("" =
# none), $4 the new content (put). Prints "<ok|changed> <node now> <mtime or ->", then the
# content after the operation. Every operation holds the file's lock; writes are in place (no
# rename: a file of another user in a sticky directory cannot be replaced) and an empty file is
# a free claim (drop removes it where it may, else empties it).
_SCRIPT = r"""
op=$1; key=$2; exp=$3; new=$4; d=__DIR__; f="$d/$key.json"
umask 000
mkdir -p "$d" 2>/dev/null; chmod __MODE__ "$d" 2>/dev/null
exec 9>>"$d/$key.lock" || exit 74
chmod 666 "$d/$key.lock" 2>/dev/null
flock -w 20 9 || exit 75
cur=; [ -s "$f" ] && cur=$(cat "$f")
st=ok
if [ "$op" != read ]; then
  if [ "$cur" != "$exp" ]; then st=changed
  elif [ "$op" = put ]; then printf '%s' "$new" > "$f" || exit 73
  elif [ "$op" = touch ]; then touch "$f" || exit 73
  elif [ "$op" = drop ]; then rm -f "$f" 2>/dev/null || : > "$f" || exit 73
  fi
fi
mt=-; [ -s "$f" ] && mt=$(stat -c %Y "$f")
printf '%s %s %s\n' "$st" "$(date +%s)" "$mt"
[ -s "$f" ] && cat "$f"
true
""".replace("__DIR__", CLAIM_DIR).replace("__MODE__", CLAIM_DIR_MODE)


class ClusterBusy(RuntimeError):
    """The cluster is claimed by another live run (the message names it)."""


@dataclass(frozen=True)
class Holder:
    """Who holds a cluster's claim."""

    run_id: str
    user: str
    host: str
    pid: int
    started: float  # epoch seconds
    cluster: str
    token: str  # this claim's own id: a resumed run (same run id) is another holder

    def text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def parse(text: str) -> Holder | None:
        try:
            data = json.loads(text)
            return Holder(str(data["run_id"]), str(data["user"]), str(data["host"]),
                          int(data["pid"]), float(data["started"]), str(data["cluster"]),
                          str(data["token"]))
        except (ValueError, KeyError, TypeError):
            return None  # not a claim of ours (or torn): treated as no heartbeat


@dataclass(frozen=True)
class _State:
    ok: bool
    now: float  # the node's clock
    mtime: float | None  # the claim file's, None when absent
    content: str

    @property
    def age_s(self) -> float:
        return math.inf if self.mtime is None else max(0.0, self.now - self.mtime)


def busy_message(cluster: str, holder: Holder | None, age_s: float, node: str = "") -> str:
    """``cluster 'prod' is in use by run … of alice@host since 09:31 (heartbeat 3 s ago)``."""
    if holder is None:
        return (f"cluster '{cluster}' is in use by another run (unreadable claim on node "
                f"{node or '0'})")
    since = time.strftime("%H:%M", time.localtime(holder.started))
    return (f"cluster '{cluster}' is in use by run {holder.run_id} of {holder.user}@"
            f"{holder.host} since {since} (heartbeat {age_s:.0f} s ago)")


def _resolved(address: str) -> str:
    """The node's address as the claim knows it: a host name resolved (its first IPv4 address,
    else its first address), an address or an unresolvable name as written."""
    try:
        infos = socket.getaddrinfo(address, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return address
    found = [str(info[4][0]) for info in infos]
    v4 = [a for a in found if a.count(".") == 3 and ":" not in a]
    return (v4 or found or [address])[0]


def _stem(address: str) -> str:
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in address)


def node_keys(cluster: Cluster) -> list[tuple[str, Host]]:
    """The claim files' stems of the cluster's nodes (resolved addresses, sorted, each once)
    with a node of each: the order every run takes them in."""
    keys: dict[str, Host] = {}
    for node in cluster.hosts:
        keys.setdefault(_stem(_resolved(node.address)), node)
    return sorted(keys.items())


@dataclass
class _Node:
    key: str
    host: CommandHost


class Claim:
    """A run's claim on one cluster (every node of it): :meth:`acquire`, heartbeat thread,
    :meth:`release`."""

    def __init__(self, cluster: Cluster, run_id: str, registry: Registry | None = None, *,
                 heartbeat_s: float = HEARTBEAT_S, stale_s: float = STALE_S,
                 host: CommandHost | None = None,
                 on_lost: Callable[[Claim], None] | None = None) -> None:
        """``host``: the command host of every node (tests); ``on_lost(claim)`` is called from
        the heartbeat thread when the claim is found taken over (``lost``, ``lost_since``)."""
        self.cluster = cluster
        self.nodes = [_Node(key, host or host_for(cluster, node, registry))
                      for key, node in node_keys(cluster)]
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.me = Holder(run_id, _user(), socket.gethostname(), os.getpid(), time.time(),
                         cluster.name, uuid.uuid4().hex)
        self.held = False
        self.lost: str | None = None  # why the claim was lost while held (taken over)
        self.lost_since: float | None = None  # epoch: the last heartbeat that found it ours
        self.on_lost = on_lost
        self.warnings: list[str] = []
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _call(self, node: _Node, op: str, expected: str = "", new: str = "") -> _State:
        argv = ["sh", "-c", _SCRIPT, "ppsweep-claim", op, node.key, expected, new]
        res = node.host.run(argv, 40)
        lines = res.stdout.split("\n", 1)
        head = lines[0].split()
        if not res.ok or len(head) != 3:
            raise HostError(f"host {node.host.name}: cannot {op} the claim of cluster "
                            f"'{self.cluster.name}' in {CLAIM_DIR} (exit {res.exit_status}): "
                            f"{res.stderr.strip()[:300]}")
        mtime = None if head[2] == "-" else float(head[2])
        return _State(head[0] == "ok", float(head[1]), mtime,
                      lines[1] if len(lines) > 1 else "")

    def try_acquire(self) -> str | None:
        """Take every node's claim if each is free, this run's, or its holder dead; None when
        held now, else the busy message (and no node's claim is kept). A dead holder's claim
        taken over is noted in ``warnings``."""
        mine = self.me.text()
        while True:
            taken: list[_Node] = []
            warnings: dict[str, str] = {}  # one per dead holder (its token), not per node
            busy: str | None = None
            for node in self.nodes:
                got = self._take(node, mine, warnings)
                if got is None:
                    taken.append(node)
                    continue
                busy = got
                break
            if busy is None:
                self.warnings += list(warnings.values())
                self._held()
                return None
            for node in taken:  # all or none
                with contextlib.suppress(HostError):
                    self._call(node, "drop", mine)
            if busy != _RACED:
                return busy

    def _take(self, node: _Node, mine: str, warnings: dict[str, str]) -> str | None:
        """Take one node's claim: None when it is this run's now, _RACED when another run
        changed it in between, else the busy message."""
        state = self._call(node, "read")
        holder = Holder.parse(state.content) if state.mtime is not None else None
        if state.mtime is not None and holder is not None and holder.token == self.me.token:
            return None
        dead = state.mtime is not None and (state.age_s > self.stale_s
                                            or _gone(holder, self.me.host))
        if state.mtime is not None and not dead:
            return busy_message(self.cluster.name, holder, state.age_s, node.key)
        put = self._call(node, "put", state.content if state.mtime is not None else "", mine)
        if not put.ok:
            return _RACED
        if dead:
            who = (f"run {holder.run_id} of {holder.user}@{holder.host}" if holder
                   else "an unreadable claim")
            why = (f"its process {holder.pid} on this host is gone" if _gone(
                holder, self.me.host) and holder is not None else
                f"no heartbeat for {state.age_s:.0f} s, more than {self.stale_s:g} s")
            warnings.setdefault(holder.token if holder else "", f"cluster '{self.cluster.name}'"
                                f": took over the claim of {who} ({why}: its run is dead)")
        return None

    def acquire(self, wait_s: float = 0.0,
                on_wait: Callable[[str, float], None] | None = None,
                clock: Callable[[], float] = time.monotonic) -> None:
        """Take the claim, waiting up to ``wait_s`` (``math.inf``: as long as it takes) for the
        holder to release it; ``on_wait(message, waited_s)`` at every look while waiting.
        Raises :class:`ClusterBusy` when it is still held after that."""
        start = clock()
        while True:
            busy = self.try_acquire()
            if busy is None:
                return
            waited = clock() - start
            if waited >= wait_s:
                if wait_s > 0:
                    busy += f"; waited {waited:.0f} s (--ppsweep-wait-cluster {wait_s:g})"
                raise ClusterBusy(busy)
            if on_wait is not None:
                on_wait(busy, waited)
            self._stop.wait(min(POLL_S, max(0.05, wait_s - waited)))

    def _held(self) -> None:
        self.held = True
        self.lost_since = None
        if self._beat is None:
            self._stop.clear()
            self._beat = threading.Thread(target=self._heartbeat, daemon=True,
                                          name=f"ppsweep-claim-{self.cluster.name}")
            self._beat.start()

    def _heartbeat(self) -> None:
        mine = self.me.text()
        last_ok = time.time()  # the claim was found ours when taken
        while not self._stop.wait(self.heartbeat_s):
            beat = time.time()
            for node in list(self.nodes):  # move() may put other nodes in meanwhile
                try:
                    state = self._call(node, "touch", mine)
                except HostError:
                    continue  # a node unreachable for a moment: the next beat tries again
                if not state.ok:
                    self._lost(last_ok, Holder.parse(state.content))
                    return
            last_ok = beat

    def move(self, cluster: Cluster, registry: Registry | None = None) -> None:
        """The cluster on other nodes (a new allocation of its kind): the claim is taken on each
        of them, as :meth:`try_acquire` does (a node already this run's keeps its file), and the
        heartbeat and the release go on there. The nodes left behind are given back where they
        can still be asked (not through an allocation that is gone: there their files go stale
        and are taken over). Raises
        :class:`ClusterBusy` when another live run holds one of the new nodes (the files taken
        here are given back, the claim stays on its nodes); a claim already lost stays lost."""
        if not self.held:
            return
        mine = self.me.text()
        before = {node.key for node in self.nodes}
        nodes = [_Node(key, host_for(cluster, node, registry))
                 for key, node in node_keys(cluster)]
        while True:
            warnings: dict[str, str] = {}
            taken: list[_Node] = []
            busy: str | None = None
            for node in nodes:
                busy = self._take(node, mine, warnings)
                if busy is not None:
                    break
                taken.append(node)
            if busy is None:
                break
            for node in taken:  # all or none: give back what this move took
                if node.key not in before:
                    with contextlib.suppress(HostError):
                        self._call(node, "drop", mine)
            if busy != _RACED:
                raise ClusterBusy(busy)
        left = [node for node in self.nodes if node.key not in {n.key for n in nodes}]
        self.cluster = cluster
        self.nodes = nodes
        self.warnings += list(warnings.values())
        for node in left:
            with contextlib.suppress(HostError):
                self._call(node, "drop", mine)

    def _lost(self, since: float, holder: Holder | None) -> None:
        """The claim was found taken over: what was measured since ``since`` shared the
        cluster with another run."""
        self.lost = ("the claim was taken over by "
                     + (f"run {holder.run_id} of {holder.user}@{holder.host}"
                        if holder else "another run"))
        self.lost_since = since
        self.held = False
        if self.on_lost is not None:
            self.on_lost(self)

    def release(self) -> None:
        """Stop the heartbeat and remove the claim where it is still this run's (idempotent)."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=60)
            self._beat = None
        if self.held or self.lost:  # a lost claim: the nodes still this run's (compare-and-swap)
            self.held = False
            for node in self.nodes:
                # unreachable: that node's claim goes stale and is taken over later
                with contextlib.suppress(HostError):
                    self._call(node, "drop", self.me.text())

    def __enter__(self) -> Claim:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_RACED = "\0raced"  # another run changed a node's claim between the read and the put


def _gone(holder: Holder | None, here: str) -> bool:
    """A holder on this very host whose process no longer exists (a killed pytest): dead now,
    without waiting for its heartbeat to go stale."""
    return holder is not None and process_gone(holder.host, holder.pid, here)


def process_gone(host: str, pid: int, here: str | None = None) -> bool:
    """Process ``pid`` of ``host`` is known to have ended: ``host`` is this one (``here``,
    default this machine's name) and the pid is gone or a zombie. False whenever it cannot be
    told from here (another host, no such pid given, another user's process)."""
    here = socket.gethostname() if here is None else here
    if host != here or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _zombie(pid)


def _zombie(pid: int) -> bool:
    """A process that has exited but is not reaped yet (its parent died and init has not
    collected it): it still answers ``kill(pid, 0)``, but its heartbeat will never beat again."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no procfs (macOS): the stale heartbeat decides
    # "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def claim_all(clusters: Sequence[Cluster], run_id: str, registry: Registry | None = None, *,
              wait_s: float = 0.0, on_wait: Callable[[str, float], None] | None = None,
              say: Callable[[str], None] = lambda _m: None,
              on_lost: Callable[[Claim], None] | None = None) -> list[Claim]:
    """Claims on every cluster (a pool's), in order; a cluster still held after ``wait_s``
    raises :class:`ClusterBusy` after the claims already taken are released. ``say`` gets
    the takeover warnings."""
    held: list[Claim] = []
    try:
        for cluster in clusters:
            claim = Claim(cluster, run_id, registry, on_lost=on_lost)
            claim.acquire(wait_s, on_wait)
            held.append(claim)
            for warning in claim.warnings:
                say(warning)
    except BaseException:
        for claim in held:
            claim.release()
        raise
    return held


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
