"""On the SSH process backend, a rank's child that starts its own session (setsid) does not
survive teardown: after the rank's group is stopped, the node is swept for the rank's labels
(cluster/strays.py). The local backend's twin is tests/reliability/test_strays.py."""

from __future__ import annotations

import sys
from pathlib import Path

from support.processes import wait_until
from support.remote import TestHosts, rank_processes

from pytest_ppsweep.cluster.labels import rank_labels
from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.cluster.ssh import SshHost, SshSettings
from pytest_ppsweep.cluster.strays import stray_message

# a rank that starts a daemon-like child in a session of its own, then serves (sleeps)
ESCAPER = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'],"
    " start_new_session=True)\n"
    "print('started', flush=True)\n"
    "time.sleep(3600)\n"
)


def test_process_rank_child_in_its_own_session_is_stopped(
    test_hosts: TestHosts, tmp_path: Path
) -> None:
    from pytest_ppsweep.cluster.ssh_launcher import SshProcessLauncher

    settings = SshSettings(key_filename=test_hosts.ssh_key, known_hosts=test_hosts.known_hosts)
    host = SshHost("h603", "10.200.0.103", settings)
    spec = RankSpec(2, "h603", "10.200.0.103", (sys.executable, "-c", ESCAPER), {})
    labels = rank_labels("strays-ssh", "ns", "pp4-tp8-ep4", 2)
    rank = SshProcessLauncher({"10.200.0.103": host}).start(spec, tmp_path / "node2.log", labels)

    def escaped() -> list[int]:
        return [p.host_pid for p in rank_processes(test_hosts)
                if p.host_pgid != rank.pgid and "sleep(3600)" in p.cmd]

    try:
        wait_until(escaped, 20, "the rank's child in its own session")
        (pid,) = escaped()
    finally:
        rank.stop(grace_s=2)
    assert not rank_processes(test_hosts), "a process of the run survived teardown"
    assert rank.strays == [pid]
    assert stray_message(2, rank.strays) == (
        f"1 process had left rank 2's process group: pid {pid} (stopped)")
