"""The two remote launchers on real hosts: a rank process over SSH and a rank container through
the docker SDK over ssh://; start, stream the log while running, exit status, stop."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from support.processes import wait_until
from support.remote import (
    IMAGE,
    TICKER,
    TestHosts,
    assert_container_rank_shape,
    make_device_dir,
    rank_processes,
)

from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.labels import rank_labels
from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.cluster.ssh import SshHost, SshSettings
from pytest_ppsweep.matrix.model import Cluster, Host

# prints a line every 0.1 s and keeps a child process in its group


def labels(run: str, node: int) -> dict[str, str]:
    return rank_labels(run, "ns", "pp4-tp8-ep4", node)


def cluster(test_hosts: TestHosts, launcher: str, **extra: object) -> Cluster:
    return Cluster(
        name="ns",
        kind="ssh",
        launcher=launcher,
        hosts=tuple(Host(address=a, name=n) for n, a in test_hosts.hosts),
        gpus_per_node=8,
        server_module="pytest_ppsweep.sim",
        port=30000,
        dist_init_port=20000,
        nvidia_smi=(),
        ssh_key=test_hosts.ssh_key,
        known_hosts=test_hosts.known_hosts,
        **extra,  # type: ignore[arg-type]
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# -- process over SSH ---------------------------------------------------------------------------


def test_process_rank_streams_its_log_and_stops_with_its_whole_group(
    test_hosts: TestHosts, tmp_path: Path
) -> None:
    from pytest_ppsweep.cluster.ssh_launcher import REMOTE_ROOT, SshProcessLauncher

    settings = SshSettings(key_filename=test_hosts.ssh_key, known_hosts=test_hosts.known_hosts)
    host = SshHost("h603", "10.200.0.103", settings)
    launcher = SshProcessLauncher({"10.200.0.103": host})
    spec = RankSpec(
        2, "h603", "10.200.0.103", (sys.executable, "-c", TICKER), {"GREETING": "hi there"}
    )
    log = tmp_path / "node2.log"
    rank = launcher.start(spec, log, labels("launch-proc", 2))
    try:
        # streamed into the local file while the rank runs
        wait_until(lambda: len(lines(log)) >= 10, 20, "10 streamed log lines")
        # the rank's environment and labels; SIGINT not ignored (as `cmd &` would leave it)
        assert lines(log)[:2] == ["env hi there launch-proc", "sigint True"]
        assert rank.poll() is None
        group = [p for p in rank_processes(test_hosts) if p.host_pgid == rank.pgid]
        # setsid: the wrapper leads its group; python and its sleep child are in it
        assert {p.cmd.split()[0] for p in group} == {"sh", sys.executable, "sleep"}
        assert any(p.host_pid == rank.pid for p in group)
        assert host.run(["ps", "-o", "pgid=", "-p", str(rank.pid)]).stdout.strip() == str(rank.pgid)
    finally:
        t0 = time.monotonic()
        rc = rank.stop(grace_s=5)
    assert rc == 143 and time.monotonic() - t0 < 5  # SIGTERM, no need for SIGKILL
    assert rank.poll() == 143 and rank.stop() == 143  # idempotent
    assert not [p for p in rank_processes(test_hosts) if p.host_pgid == rank.pgid]
    assert not host.run(["test", "-e", f"{REMOTE_ROOT}/launch-proc"]).ok, "node copy not removed"
    streamed = lines(log)
    assert streamed[-1].startswith("tick") and len(streamed) >= 12


def test_process_rank_that_exits_reports_its_status(test_hosts: TestHosts, tmp_path: Path) -> None:
    from pytest_ppsweep.cluster.ssh_launcher import SshProcessLauncher

    settings = SshSettings(key_filename=test_hosts.ssh_key, known_hosts=test_hosts.known_hosts)
    host = SshHost("h604", "10.200.0.104", settings)
    spec = RankSpec(3, "h604", "10.200.0.104", ("sh", "-c", "echo last words; exit 3"), {})
    log = tmp_path / "node3.log"
    rank = SshProcessLauncher({"10.200.0.104": host}).start(spec, log, labels("launch-exit", 3))
    wait_until(lambda: rank.poll() is not None, 20, "the rank's exit")
    assert rank.poll() == 3
    assert lines(log) == ["last words"]
    assert rank.stop() == 3


# -- docker over ssh:// ------------------------------------------------------------------------


def test_container_rank_has_the_requested_shape(test_hosts: TestHosts, tmp_path: Path) -> None:
    from pytest_ppsweep.cluster.docker_launcher import DockerLauncher

    model = tmp_path / "model"
    model.mkdir()
    devices = make_device_dir(tmp_path / "dev")
    state = tmp_path / "state"
    state.mkdir()
    c = cluster(test_hosts, "docker", shm_size="1g", mounts=(str(state),))
    launcher = DockerLauncher(c, IMAGE, str(model), [f"{devices}:/dev/infiniband", "/dev/null"])
    line = assert_container_rank_shape(launcher, ("h602", "10.200.0.102"),
                                       labels("launch-docker", 1), tmp_path, model, devices, state)
    assert "DOCKER_HOST=ssh://root@10.200.0.102" in line


def test_container_rank_that_exits_and_a_missing_image(
    test_hosts: TestHosts, tmp_path: Path
) -> None:
    from pytest_ppsweep.cluster.docker_launcher import DockerLauncher

    launcher = DockerLauncher(cluster(test_hosts, "docker"), IMAGE, "", [])
    spec = RankSpec(0, "h601", "10.200.0.101", ("sh", "-c", "echo last words; exit 3"), {})
    log = tmp_path / "node0.log"
    rank = launcher.start(spec, log, labels("launch-docker-exit", 0))
    wait_until(lambda: rank.poll() is not None, 30, "the container's exit")
    assert rank.poll() == 3 and lines(log) == ["last words"]
    # a container of ours left under the same name (an earlier attempt) is replaced
    again = launcher.start(spec, tmp_path / "again.log", labels("launch-docker-exit", 0))
    assert again.name == rank.name
    assert again.stop() is not None and rank.stop() == 3
    missing = DockerLauncher(cluster(test_hosts, "docker"), "local/not-here:1", "", [])
    with pytest.raises(HostError, match="host h601: image local/not-here:1 is not present"):
        missing.start(spec, log, labels("launch-docker-missing", 0))
