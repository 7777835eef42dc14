"""The reap advice names only what ``--ppsweep-reap`` may remove (issue 39 point 8): a live
decoy rank of another user on this cluster's address and port is left alone and not named as a
leftover, and the port check says it is not ours to remove; this user's own rank is named."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from support.processes import wait_until

from pytest_ppsweep.cluster import reap
from pytest_ppsweep.cluster.preflight import NOT_OURS_HINT, REAP_HINT, check_local_ports
from pytest_ppsweep.matrix.model import Cluster, Host

ADDRESS, PORT = "127.0.19.1", 38411
CLUSTER = Cluster(name="box", kind="local", launcher="process", hosts=(Host(ADDRESS, "n0"),),
                  gpus_per_node=1, server_module="pytest_ppsweep.sim", port=PORT,
                  dist_init_port=PORT + 1, nvidia_smi=())
# A stand-in rank: listens where a rank of this cluster would, with a rank's arguments and label.
RANK = ("import socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, "
        "socket.SO_REUSEADDR, 1); s.bind(('{a}', {p})); s.listen(); time.sleep(120)")

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root and setpriv to run a process as another user")


def _listening() -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((ADDRESS, PORT)) == 0


@pytest.fixture
def rank() -> Iterator[Callable[[str | None], subprocess.Popen[bytes]]]:
    """``rank(user)``: the stand-in rank started as ``user`` (None: this user)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(user: str | None) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-c", RANK.format(a=ADDRESS, p=PORT),
                "--host", ADDRESS, "--port", str(PORT)]
        if user is not None:
            uid = pwd.getpwnam(user).pw_uid
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        env = {"PATH": os.environ["PATH"], "PPSWEEP_RUN": "decoy-run",
               "PPSWEEP_CLUSTER": CLUSTER.name}
        proc = subprocess.Popen(argv, env=env, start_new_session=True)
        procs.append(proc)
        wait_until(_listening, 20, "the stand-in rank to listen")
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_another_users_live_rank_is_not_named_for_reaping(
    rank: Callable[[str | None], subprocess.Popen[bytes]],
) -> None:
    decoy = rank("nobody")
    assert reap.find_blocking(CLUSTER, exclude_run="mine") == []
    problems = check_local_ports(CLUSTER, CLUSTER.hosts[0], rank0=False)
    assert len(problems) == 1 and f"pid {decoy.pid}" in problems[0], problems
    assert NOT_OURS_HINT in problems[0] and "--ppsweep-reap to remove" not in problems[0]
    assert decoy.poll() is None  # left alone


def test_this_users_rank_is_named_with_the_reap_advice(
    rank: Callable[[str | None], subprocess.Popen[bytes]],
) -> None:
    own = rank(None)
    found = reap.find_blocking(CLUSTER, exclude_run="mine")
    assert [(f.run, f.ident) for f in found] == [("decoy-run", str(os.getpgid(own.pid)))]
    problems = check_local_ports(CLUSTER, CLUSTER.hosts[0], rank0=False)
    assert REAP_HINT in problems[0], problems
