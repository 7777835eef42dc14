"""The cluster claim (cluster/claim.py) on a local cluster: one holder at a time, even when many
try at once; a busy message naming the holder; waiting; a dead holder's claim taken over with a
warning, and that holder finding out at its next heartbeat; clusters sharing a node meet; a claim
moves with its cluster's nodes (a renewed allocation); another user takes a dead run's claim
over; a claim lost mid-run makes the rounds since INVALID."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from support.processes import wait_until
from support.runs import Point, config_row, rounds, write_run

from pytest_ppsweep.cluster.base import CommandResult
from pytest_ppsweep.cluster.claim import (
    CLAIM_DIR,
    CLAIM_DIR_MODE,
    Claim,
    ClusterBusy,
    Holder,
    node_keys,
)
from pytest_ppsweep.cluster.hosts import LocalHost
from pytest_ppsweep.folder.runfolder import CLAIM_LOST_JSON, RunStore
from pytest_ppsweep.matrix.model import Cluster, Host
from pytest_ppsweep.results.aggregate import load_run, summarize_run
from pytest_ppsweep.results.verdict import judge, point_verdict


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A local cluster on an address no other test uses (its claim file is its own)."""
    address = f"127.0.{77 + os.getpid() % 100}.{uuid.uuid4().int % 250 + 1}"
    yield Cluster(name="prod", kind="local", launcher="process",
                  hosts=(Host(address=address, name="n0"),), gpus_per_node=1,
                  server_module="x", port=1, dist_init_port=2, nvidia_smi=())
    for suffix in ("json", "lock"):
        Path(CLAIM_DIR, f"{address}.{suffix}").unlink(missing_ok=True)


def test_one_holder_and_the_busy_message_names_it(cluster: Cluster) -> None:
    first = Claim(cluster, "kimi3-pp-20261201-093100", heartbeat_s=0.2)
    second = Claim(cluster, "other-run", heartbeat_s=0.2)
    first.acquire()
    try:
        with pytest.raises(ClusterBusy) as busy:
            second.acquire()
        me = first.me
        assert re.fullmatch(
            rf"cluster 'prod' is in use by run kimi3-pp-20261201-093100 of {me.user}@{me.host} "
            r"since \d\d:\d\d \(heartbeat \d+ s ago\)", str(busy.value)), str(busy.value)
        assert not second.held
    finally:
        first.release()
    second.acquire()  # free again
    second.release()
    assert not Path(CLAIM_DIR, f"{cluster.rank0().address}.json").exists()


def test_many_at_once_one_wins(cluster: Cluster) -> None:
    claims = [Claim(cluster, f"run-{i}", heartbeat_s=5) for i in range(6)]
    go = threading.Barrier(len(claims))
    results: dict[int, str | None] = {}

    def race(i: int) -> None:
        go.wait()
        results[i] = claims[i].try_acquire()

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(claims))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        assert sum(r is None for r in results.values()) == 1, results
        assert sum(c.held for c in claims) == 1
    finally:
        for c in claims:
            c.release()


def test_a_waiting_run_gets_it_when_released(cluster: Cluster) -> None:
    first = Claim(cluster, "first", heartbeat_s=0.2)
    first.acquire()
    seen: list[str] = []

    def on_wait(message: str, waited: float) -> None:
        seen.append(message)
        if len(seen) == 2:
            first.release()

    second = Claim(cluster, "second", heartbeat_s=0.2)
    second.acquire(wait_s=30, on_wait=on_wait)
    try:
        assert second.held and len(seen) == 2
        assert seen[0].startswith("cluster 'prod' is in use by run first of ")
    finally:
        second.release()


def test_waiting_has_a_bound(cluster: Cluster) -> None:
    expected = r"in use by run first .*; waited \d+ s \(--ppsweep-wait-cluster 1\.5\)"
    with Claim(cluster, "first", heartbeat_s=0.2), pytest.raises(ClusterBusy, match=expected):
        Claim(cluster, "second").acquire(wait_s=1.5)


def test_a_dead_holders_claim_is_taken_over_with_a_warning(cluster: Cluster) -> None:
    dead = Claim(cluster, "crashed-run", heartbeat_s=0.3, stale_s=2)
    dead.acquire()
    dead._stop.set()  # its process "died": no more heartbeats (the claim file stays)
    assert dead._beat is not None
    dead._beat.join(5)
    dead._stop.clear()
    path = Path(CLAIM_DIR, f"{cluster.rank0().address}.json")
    old = path.stat().st_mtime - 10  # its last heartbeat 10 s ago
    os.utime(path, (old, old))
    taker = Claim(cluster, "new-run", heartbeat_s=0.3, stale_s=2)
    taker.acquire()
    try:
        assert taker.held
        assert len(taker.warnings) == 1
        assert re.match(r"cluster 'prod': took over the claim of run crashed-run of .* \(no "
                        r"heartbeat for 1\d s, more than 2 s: its run is dead\)",
                        taker.warnings[0]), taker.warnings
        # had it only been asleep, its next heartbeat finds the claim gone
        dead._beat = None
        dead._held()
        assert dead._beat is not None
        dead._beat.join(5)
        assert dead.lost is not None and "taken over by run new-run" in dead.lost
    finally:
        taker.release()
        dead.release()


def test_a_killed_holder_on_this_host_is_dead_at_once(cluster: Cluster) -> None:
    """A pytest killed with SIGKILL leaves its claim with a fresh heartbeat; its process is gone
    from this host, so the next run takes over without waiting for the claim to go stale."""
    done = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    _taken_over_at_once(cluster, int(done.stdout))  # a process that has ended


def _taken_over_at_once(cluster: Cluster, pid: int) -> None:
    """A claim held under ``pid`` with a fresh heartbeat is taken over without waiting for it
    to go stale (stale_s of an hour), with the warning naming that process."""
    dead = Claim(cluster, "dead-run", heartbeat_s=60)
    dead.me = replace(dead.me, pid=pid)
    dead.acquire()
    dead._stop.set()
    taker = Claim(cluster, "rerun", stale_s=3600)
    try:
        taker.acquire()
        assert [w for w in taker.warnings
                if f"its process {pid} on this host is gone: its run is dead" in w], taker.warnings
    finally:
        taker.release()
        dead.release()


def test_a_holder_that_exited_but_is_not_reaped_is_dead_at_once(cluster: Cluster) -> None:
    """A pytest whose terminal was closed exits, but its parent went with the terminal and
    nothing has reaped it yet: the zombie still answers kill(pid, 0), yet it is dead."""
    child = subprocess.Popen(["true"])  # never waited for until the end: a zombie meanwhile
    stat = Path(f"/proc/{child.pid}/stat")
    try:
        wait_until(lambda: stat.read_text().rpartition(")")[2].split()[0] == "Z", 10,
                   "the child to exit unreaped")
        _taken_over_at_once(cluster, child.pid)
    finally:
        child.wait(timeout=10)


# ---------------------------------------------------------------- a claim on the set of nodes


def _local(name: str, *addresses: str) -> Cluster:
    return Cluster(name=name, kind="local", launcher="process",
                   hosts=tuple(Host(address=a, name=f"n{i}") for i, a in enumerate(addresses)),
                   gpus_per_node=1, server_module="x", port=1, dist_init_port=2, nvidia_smi=())


@pytest.fixture
def nodes() -> Iterator[list[str]]:
    """Three addresses no other test uses; their claim files are removed afterwards."""
    net = f"127.{10 + os.getpid() % 200}.{uuid.uuid4().int % 250 + 1}"
    addresses = [f"{net}.{i}" for i in (1, 2, 3)]
    yield addresses
    for address in addresses:
        for suffix in ("json", "lock"):
            Path(CLAIM_DIR, f"{address}.{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize("other", ["subset", "other node 0", "overlap"])
def test_clusters_that_share_a_node_meet(nodes: list[str], other: str) -> None:
    a, b, c = nodes
    theirs = {"subset": (b,), "other node 0": (b, a), "overlap": (c, b)}[other]
    with Claim(_local("prod", a, b), "first", heartbeat_s=5):
        with pytest.raises(ClusterBusy, match=r"cluster 'dev' is in use by run first of "):
            Claim(_local("dev", *theirs), "second").acquire()
        # all or none: the nodes it could take were given back
        assert not Path(CLAIM_DIR, f"{c}.json").exists()
    with Claim(_local("dev", *theirs), "second"):
        pass


def test_a_host_name_and_its_address_are_one_node() -> None:
    assert node_keys(_local("x", "localhost"))[0][0] == "127.0.0.1"
    assert [k for k, _ in node_keys(_local("x", "127.0.0.2", "127.0.0.1", "localhost"))] == [
        "127.0.0.1", "127.0.0.2"]


def test_one_file_per_node_and_none_left(nodes: list[str]) -> None:
    claim = Claim(_local("prod", *nodes), "run", heartbeat_s=5)
    claim.acquire()
    try:
        docs = [json.loads(Path(CLAIM_DIR, f"{a}.json").read_text()) for a in nodes]
        assert {d["token"] for d in docs} == {claim.me.token}
        mode = Path(CLAIM_DIR).stat().st_mode
        assert stat.S_IMODE(mode) == int(CLAIM_DIR_MODE, 8) and not mode & stat.S_ISVTX
    finally:
        claim.release()
    assert not [a for a in nodes if Path(CLAIM_DIR, f"{a}.json").exists()]


def _holder(address: str) -> str:
    path = Path(CLAIM_DIR, f"{address}.json")
    return json.loads(path.read_text())["run_id"] if path.exists() and path.stat().st_size else ""


def test_a_claim_moves_with_its_clusters_nodes(nodes: list[str]) -> None:
    """A renewed allocation puts the cluster on other nodes: the claim is taken there, the
    heartbeat touches them, the node left behind is given back, and the release drops them all.
    A new node another live run holds is refused: the claim stays where it was."""
    a, b, c = nodes
    claim = Claim(_local("prod", a, b), "renewed", heartbeat_s=0.1)
    claim.acquire()
    try:
        claim.move(_local("prod", b, c))
        assert [_holder(x) for x in nodes] == ["", "renewed", "renewed"]
        old = time.time() - 30
        os.utime(Path(CLAIM_DIR, f"{c}.json"), (old, old))
        wait_until(lambda: Path(CLAIM_DIR, f"{c}.json").stat().st_mtime > old + 20, 10,
                   "the heartbeat to touch the new node's claim")
        with Claim(_local("other", a), "other-run", heartbeat_s=5):
            with pytest.raises(ClusterBusy, match="cluster 'prod' is in use by run other-run"):
                claim.move(_local("prod", c, a))
            assert [_holder(x) for x in nodes] == ["other-run", "renewed", "renewed"]
            assert claim.held and [n.key for n in claim.nodes] == sorted([b, c])
    finally:
        claim.release()
    assert [_holder(x) for x in nodes] == ["", "", ""]


# ---------------------------------------------------------------- two users


class _AsUser(LocalHost):
    """The local host, every command run as ``user`` (runuser)."""

    def __init__(self, user: str) -> None:
        super().__init__("local", "127.0.0.1")
        self.user = user

    def run(self, argv: Sequence[str], timeout: float = 60.0) -> CommandResult:
        return super().run(["runuser", "-u", self.user, "--", *argv], timeout)


SECOND_USER = "ppsweep-claim2"


@pytest.fixture
def two_users() -> tuple[str, str]:
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("two users need root (runuser, useradd)")
    if subprocess.run(["id", SECOND_USER], capture_output=True, check=False).returncode:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        SECOND_USER], check=True)
    return "nobody", SECOND_USER


def test_another_user_takes_over_a_dead_runs_claim(nodes: list[str],
                                                   two_users: tuple[str, str]) -> None:
    """The issue's probe: a claim put by one user, its heartbeat 10 minutes old, taken over by
    another user (no ``mv: Operation not permitted``, exit 73, nor a ``.tmp`` file left)."""
    first, second = two_users
    cluster = _local("prod", *nodes[:2])
    dead = Claim(cluster, "dead-run", heartbeat_s=3600, host=_AsUser(first))
    dead.acquire()
    dead._stop.set()
    for address in nodes[:2]:
        path = Path(CLAIM_DIR, f"{address}.json")
        assert path.stat().st_uid == pwd.getpwnam(first).pw_uid
        old = time.time() - 600
        os.utime(path, (old, old))
    taker = Claim(cluster, "rerun", host=_AsUser(second))
    try:
        taker.acquire()
        assert taker.held and len(taker.warnings) == 1, taker.warnings
        for address in nodes[:2]:
            doc = json.loads(Path(CLAIM_DIR, f"{address}.json").read_text())
            assert doc["run_id"] == "rerun"
        assert not [p for p in Path(CLAIM_DIR).iterdir() if ".tmp" in p.name]
    finally:
        taker.release()
        dead.release()
    assert not [a for a in nodes[:2] if Path(CLAIM_DIR, f"{a}.json").exists()]


# ---------------------------------------------------------------- a claim lost mid-run


def test_a_claim_lost_mid_run_marks_the_rounds_since_invalid(nodes: list[str],
                                                              tmp_path: Path) -> None:
    """A laptop asleep past the stale time: another run took the claim over. The next heartbeat
    finds it, the session records it (session/claims.py does what on_lost does here), and every
    point with a round measured since the last good heartbeat is INVALID."""
    cluster = _local("prod", *nodes[:2])
    run = write_run(tmp_path / "run", rounds(EARLY) + rounds(LATE),
                    [config_row("early", 1, 2, 1, 0, 1000), config_row("late", 2, 1, 1, 1, 1000)])
    store = RunStore(tmp_path, "run")
    seen: list[Claim] = []

    def lost(claim: Claim) -> None:
        store.update_json(CLAIM_LOST_JSON, **{claim.cluster.name: {"since": claim.lost_since,
                                                                "why": claim.lost}})
        seen.append(claim)

    mine = Claim(cluster, "asleep", heartbeat_s=0.1, on_lost=lost)
    mine.acquire()
    try:
        old = time.time() - 120
        for repeat in (1, 2, 3):  # the rounds' raw files, as the run writes them: measured
            raw = store.raw_path("early", EARLY.concurrency, repeat)  # before (2 min ago)
            raw.write_text("{}\n")
            os.utime(raw, (old, old))
        assert judge_all(run) == {"early": True, "late": True}
        thief = Holder("other-run", "bob", "h9", 1, time.time(), "prod", "t0k3n").text()
        Path(CLAIM_DIR, f"{nodes[1]}.json").write_text(thief)  # taken over meanwhile
        for repeat in (1, 2, 3):  # measured while the other run had the nodes
            store.raw_path("late", LATE.concurrency, repeat).write_text("{}\n")
        wait_until(lambda: bool(seen), 10, "the heartbeat to find the claim lost")
        assert mine.lost == "the claim was taken over by run other-run of bob@h9"
        assert mine.lost_since is not None and mine.lost_since <= time.time()
        assert not mine.held
        verdicts = {v.config_id: v for v in judge(load_run(run), summarize_run(load_run(run)))}
        assert verdicts["early"].valid
        assert not verdicts["late"].valid
        assert any(f.startswith("the cluster was shared: the claim was taken over by run "
                                "other-run of bob@h9") for f in verdicts["late"].failures)
        assert not point_verdict(run, "late", LATE.concurrency).valid
    finally:
        mine.release()
    assert Path(CLAIM_DIR, f"{nodes[1]}.json").exists()  # not ours: left to its holder
    assert not Path(CLAIM_DIR, f"{nodes[0]}.json").exists()


EARLY = Point("early", 1, 2, 1, 4, 1000.0, 1.0, 1.2)
LATE = Point("late", 2, 1, 1, 4, 1000.0, 1.0, 1.2)


def judge_all(run: Path) -> dict[str, bool]:
    data = load_run(run)
    return {v.config_id: v.valid for v in judge(data, summarize_run(data))}
