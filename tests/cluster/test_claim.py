"""The cluster claim (cluster/claim.py) on a local cluster: one holder at a time, even when many
try at once; a busy message naming the holder; waiting; a dead holder's claim taken over with a
warning, and that holder finding out at its next heartbeat."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from support.processes import wait_until

from pytest_ppsweep.cluster.claim import CLAIM_DIR, Claim, ClusterBusy
from pytest_ppsweep.matrix.model import Cluster, Host


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
