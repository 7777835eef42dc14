"""The chaos matrix in CI, remote backends (namespace hosts h601-h602, real sshd and dockerd):
every SSH connection to node 1's host cut while its log streams, then a SIGKILL of node 1's
rank, on one SSH-process boot; a taken port on the SSH host; node 1's dockerd stopped and
restarted during a Docker-over-SSH layout. Each: the expected verdict, its evidence, nothing
left on any host (benchmarks/benchkit/chaos.py; benchmarks/bench_chaos.py runs the whole matrix).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchkit.chaos import Remote, Result, check_cell, run_boot
from support.remote import TestHosts

SSH_CI = (("port_taken",), ("ssh_drop", "sigkill"))
DOCKER_CI = (("dockerd_restart",),)


def _run(backend: Remote, groups: tuple[tuple[str, ...], ...]) -> dict[str, Result]:
    out: dict[str, Result] = {}
    for group in groups:
        for r in run_boot(backend, group, say=print):
            out[r.fault] = r
    return out


@pytest.fixture(scope="module")
def chaos_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("chaos-remote")
    (work / "config.json").write_text("{}")
    return work


@pytest.fixture(scope="module")
def ssh_cells(test_hosts: TestHosts, chaos_work: Path) -> dict[str, Result]:
    return _run(Remote(chaos_work / "ssh", test_hosts, "process"), SSH_CI)


@pytest.fixture(scope="module")
def docker_cells(test_hosts: TestHosts, chaos_work: Path) -> dict[str, Result]:
    return _run(Remote(chaos_work / "docker", test_hosts, "docker"), DOCKER_CI)



@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted({f for g in SSH_CI for f in g}))
def test_chaos_ssh_process(ssh_cells: dict[str, Result], fault: str) -> None:
    check_cell(ssh_cells[fault])


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted({f for g in DOCKER_CI for f in g}))
def test_chaos_docker_over_ssh(docker_cells: dict[str, Result], fault: str) -> None:
    check_cell(docker_cells[fault])
