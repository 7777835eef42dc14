"""The emulator's GPU state is per user and per network namespace (issue 39 point 8): two users'
loopback clusters, or two namespaces' 127.0.6.1, never read or block each other's nodes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ppsweep.sim.launch.gpustate import (
    GpuStatePublisher,
    GpuUse,
    default_state_dir,
    read_state,
    state_dir_of,
)

PRINT_DIR = ("from pytest_ppsweep.sim.launch.gpustate import default_state_dir; "
             "print(default_state_dir())")


def test_the_default_folder_names_the_user_and_the_network_namespace() -> None:
    netns = os.stat("/proc/self/ns/net").st_ino
    assert default_state_dir() == Path(f"/tmp/ppsweep-sim-{os.getuid()}-{netns}")
    assert state_dir_of({}) == default_state_dir()
    assert state_dir_of({"PPSWEEP_SIM_STATE_DIR": "/x/y"}) == Path("/x/y")


def _in(cmd: list[str]) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare to make a network namespace")
def test_another_network_namespace_gets_another_folder() -> None:
    here = _in([sys.executable, "-c", PRINT_DIR])
    there = _in(["unshare", "--net", sys.executable, "-c", PRINT_DIR])
    assert here == str(default_state_dir())
    assert there != here and there.startswith(f"/tmp/ppsweep-sim-{os.getuid()}-")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as another user")
def test_another_user_gets_another_folder_it_can_write() -> None:
    nobody = _in([sys.executable, "-c", "import pwd; print(pwd.getpwnam('nobody').pw_uid)"])
    there = _in(["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                 sys.executable, "-c", PRINT_DIR])
    assert there.startswith(f"/tmp/ppsweep-sim-{nobody}-") and there != str(default_state_dir())


def test_a_write_failure_is_said_once_in_the_rank_log(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    pub = GpuStatePublisher(blocked / "sub", "127.0.6.1", 4242, {"gpu_count": 1})
    pub.publish([GpuUse(0, 100)])
    pub.publish([GpuUse(0, 200)])
    err = capsys.readouterr().err
    assert err.count("cannot publish GPU state") == 1, err
    assert "nvidia-smi will show this node idle" in err
    ok = GpuStatePublisher(tmp_path / "state", "127.0.6.1", 4242, {"gpu_count": 1})
    ok.publish([GpuUse(0, 100)])
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    assert read_state(tmp_path / "state", "127.0.6.1")["gpus"] == [{"index": 0, "used_mib": 100}]
