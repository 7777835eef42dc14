"""A rank's child that leaves the process group (its own session, as daemons and some launchers
do) does not survive teardown on the local backend: the node is swept for the rank's labels after
its group is stopped, and the finding is reported (cluster/strays.py). The SSH backend's twin is
tests/remote/test_strays_remote.py."""

from __future__ import annotations

import os
from pathlib import Path

from support.matrices import CONFIGS, small_matrix
from support.processes import proc_entries, wait_until
from support.sim import next_ports

from pytest_ppsweep.cluster.labels import NODE_RANK_ENV, RUN_ENV
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.service.launch import Service


def _escaped(run_id: str) -> dict[int, str]:
    """pid → node rank of this run's processes that lead a session of their own but are not a
    rank's group leader (the ranks' own children stay in the rank's group)."""
    found = {}
    for entry in proc_entries():
        try:
            env = dict(item.split(b"=", 1) for item in (entry / "environ").read_bytes()
                       .split(b"\0") if b"=" in item)
            pid = int(entry.name)
            if env.get(RUN_ENV.encode()) != run_id.encode():
                continue
            if os.getsid(pid) == pid and b"sleep(3600)" in (entry / "cmdline").read_bytes():
                found[pid] = env.get(NODE_RANK_ENV.encode(), b"?").decode()
        except (OSError, ValueError):
            continue
    return found


def test_a_child_in_its_own_session_is_stopped_and_reported(tmp_path: Path) -> None:
    port, dist = next_ports()
    configs = CONFIGS.replace("tp = 8\n", 'tp = 8\nenv = { PPSWEEP_SIM_FAULTS = '
                              '"escape_child@rank=2" }\n', 1)
    text = small_matrix(configs, "127.0.9", port, dist, 200.0, tmp_path / "state")
    (tmp_path / "ppsweep.toml").write_text(text)
    sweep = load(tmp_path / "ppsweep.toml")
    config = sweep.configs[0]  # PP4 × TP8 on 4 nodes; rank 2 starts the escaping child
    run_id = f"strays-{os.getpid()}-{port}"
    service = Service(sweep, sweep.clusters["local"], config, tmp_path / "svc", run_id=run_id)
    messages: list[str] = []
    service.progress = messages.append
    try:
        service.start()
        wait_until(lambda: _escaped(run_id), 30, "rank 2's child in its own session")
        (pid, rank), = _escaped(run_id).items()
        assert rank == "2"
    finally:
        service.stop()
    assert not _escaped(run_id), "a process of the run survived teardown"
    assert not Path(f"/proc/{pid}").exists()
    expected = f"1 process had left rank 2's process group: pid {pid} (stopped)"
    assert service.strays == [expected]
    assert messages == [f"{config.id}: {expected}"]
    service.stop()  # idempotent: reported once
    assert service.strays == [expected]
