"""Session fixtures shared by several test folders (registered in tests/conftest.py), so that a
run collecting tests/real, tests/remote and tests/e2e provisions each thing once:

* ``sglang_cpu``: SGLang 0.5.23 for CPU and the tiny models (scripts/provision_sglang_cpu.sh);
* ``test_hosts``: h601-h604, real sshd and dockerd in network namespaces
  (scripts/provision_test_hosts.sh --docker, scripts/build_sim_image.sh), torn down at the end
  unless PPSWEEP_KEEP_TEST_HOSTS=1.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from support.real import Provisioned, ProvisionImpossible, provision

if TYPE_CHECKING:  # support.remote imports docker: only a run that uses the hosts pays for it
    from support.remote import TestHosts

MIN_MEM_AVAILABLE_GIB = 8.0  # rank 0 ~2 GB + 3 × 1.4 GB, plus the pytest processes

_TIMINGS: list[str] = []


def _mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How long the test hosts took (provisioning, image, teardown)."""
    for line in _TIMINGS:
        terminalreporter.write_line(f"[test hosts] {line}")


@pytest.fixture(scope="session")
def sglang_cpu() -> Provisioned:
    """SGLang 0.5.23 for CPU and the tiny models (scripts/provision_sglang_cpu.sh; seconds when
    already provisioned). Skips only when provisioning cannot work on this machine."""
    if not Path("/proc").is_dir() or not hasattr(os, "sched_getaffinity"):
        pytest.skip("real SGLang on CPU needs Linux (/proc, loopback 127.0.6.x)")
    mem = _mem_available_gib()
    if mem < MIN_MEM_AVAILABLE_GIB:
        pytest.skip(
            f"real SGLang on 4 loopback nodes needs {MIN_MEM_AVAILABLE_GIB} GiB of free "
            f"RAM, this machine has {mem:.1f} GiB available"
        )
    try:
        return provision()
    except ProvisionImpossible as exc:
        pytest.skip(f"cannot provision real SGLang here: {exc}")


@pytest.fixture(scope="session")
def test_hosts() -> Iterator[TestHosts]:
    """h601-h604 (10.200.0.101-104): sshd, dockerd and the emulator image on each."""
    from support.remote import ROOT, TestHosts, run_script

    if os.geteuid() != 0:
        pytest.skip(
            "the test hosts need root: network namespaces with their own sshd and dockerd "
            "(scripts/provision_test_hosts.sh)"
        )
    ROOT.mkdir(parents=True, exist_ok=True)
    with open(ROOT.parent / ".ppsweep-test-hosts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        took, out = run_script("provision_test_hosts.sh", "--docker")
        _TIMINGS.append(f"provisioned in {took:.1f} s: {out.strip().splitlines()[-1]}")
        took, out = run_script("build_sim_image.sh")
        _TIMINGS.append(f"image ready in {took:.1f} s: {out.strip().splitlines()[-1]}")
    hosts = TestHosts.load()
    try:
        yield hosts
    finally:
        if not os.environ.get("PPSWEEP_KEEP_TEST_HOSTS"):
            took, _out = run_script("teardown_test_hosts.sh")
            _TIMINGS.append(f"torn down in {took:.1f} s")
