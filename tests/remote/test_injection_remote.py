"""No injection on the real remote paths: values with shell metacharacters in a rank's argv and
environment reach the process over SSH (setsid wrapper through the remote login shell) and in a
container (docker SDK over ssh://) as one argument / one value each, and no shell runs them.

The rank is ``sh -c 'python3 -c "$0" "$@"; [ -e MARKER ] && echo PWNED' PRINTER VALUES…``: the
printer dumps its argv and environment, then the shell reports whether any injected command
created the marker (inside the container too, where this machine's /tmp is not visible)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support.injection import HOSTILE, MARKER, PRINTER
from support.processes import wait_until
from support.remote import IMAGE, TestHosts

from pytest_ppsweep.cluster.labels import rank_labels
from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.cluster.ssh import SshHost, SshSettings
from pytest_ppsweep.matrix.model import Cluster, Host

VALUES = list(HOSTILE.values())
ENV = {f"INJ_{i}": v for i, v in enumerate(VALUES)}


def argv(python: str) -> tuple[str, ...]:
    check = f'{python} -c "$0" "$@"; if [ -e {MARKER} ]; then echo PWNED; fi'
    return ("sh", "-c", check, PRINTER, *VALUES)


def dumped(log: Path) -> dict[str, object]:
    lines = log.read_text(encoding="utf-8").splitlines()
    assert "PWNED" not in lines, lines
    found = [line[5:] for line in lines if line.startswith("DUMP ")]
    assert found, lines
    got: dict[str, object] = json.loads(found[0])
    return got


def check(got: dict[str, object]) -> None:
    assert got["argv"] == VALUES
    env = got["env"]
    assert isinstance(env, dict)
    assert {k: env.get(k) for k in ENV} == ENV


def test_ssh_process_rank_gets_hostile_values_intact(test_hosts: TestHosts, tmp_path: Path
                                                     ) -> None:
    from pytest_ppsweep.cluster.ssh_launcher import SshProcessLauncher

    settings = SshSettings(key_filename=test_hosts.ssh_key, known_hosts=test_hosts.known_hosts)
    host = SshHost("h601", "10.200.0.101", settings)
    spec = RankSpec(0, "h601", "10.200.0.101", argv(sys.executable), ENV)
    log = tmp_path / "node0.log"
    rank = SshProcessLauncher({"10.200.0.101": host}).start(
        spec, log, rank_labels("inject-ssh", "ns", "pp1-tp1-ep1", 0))
    try:
        wait_until(lambda: rank.poll() is not None, 30, "the rank's exit")
    finally:
        rc = rank.stop()
    assert rc == 0, log.read_text()
    check(dumped(log))
    assert not host.run(["test", "-e", str(MARKER)]).ok
    assert not MARKER.exists()


def test_docker_rank_gets_hostile_values_intact(test_hosts: TestHosts, tmp_path: Path) -> None:
    from pytest_ppsweep.cluster.docker_launcher import DockerLauncher

    cluster = Cluster(
        name="ns", kind="ssh", launcher="docker",
        hosts=tuple(Host(address=a, name=n) for n, a in test_hosts.hosts), gpus_per_node=8,
        server_module="pytest_ppsweep.sim", port=30000, dist_init_port=20000, nvidia_smi=(),
        ssh_key=test_hosts.ssh_key, known_hosts=test_hosts.known_hosts,
    )
    spec = RankSpec(1, "h602", "10.200.0.102", argv("python3"), ENV)
    log = tmp_path / "service" / "node1.log"
    rank = DockerLauncher(cluster, IMAGE, "").start(
        spec, log, rank_labels("inject-docker", "ns", "pp1-tp1-ep1", 1))
    try:
        wait_until(lambda: rank.poll() is not None, 60, "the container's exit")
    finally:
        rc = rank.stop()
    assert rc == 0, log.read_text()
    check(dumped(log))
    assert not MARKER.exists()
