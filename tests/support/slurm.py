"""The tests' real Slurm: slurmctld here and one slurmd per network-namespace node s701-s704
(scripts/install_slurm.sh, scripts/provision_slurm.sh), a session fixture shared by every Slurm
test, what the cluster still holds after a test (jobs, steps, labelled processes on the nodes),
and sweep-file text for it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.labels import RUN_ENV
from support.remote import SECRET_TOKEN, run_script

ROOT = Path(os.environ.get("PPSWEEP_SLURM_ROOT", "/tmp/ppsweep-slurm"))
LOCK = Path("/tmp/ppsweep-slurm.lock")


@dataclass(frozen=True)
class TestSlurm:
    """The provisioned cluster: its slurm.conf and nodes (name, address), and its login node
    (an sshd in the first node's namespace: address, client key, known_hosts)."""

    __test__ = False

    conf: Path
    nodes: tuple[tuple[str, str], ...]
    login: str = ""
    ssh_key: str = ""
    known_hosts: str = ""

    @classmethod
    def load(cls, root: Path = ROOT) -> TestSlurm:
        env = dict(line.split("=", 1) for line in (root / "slurm.env").read_text().splitlines()
                   if "=" in line)
        pairs = tuple(tuple(p.split("=", 1)) for p in env["NODES"].split(","))
        return cls(Path(env["SLURM_CONF"]), pairs,  # type: ignore[arg-type]
                   env.get("LOGIN", ""), env.get("SSH_KEY", ""), env.get("KNOWN_HOSTS", ""))

    def login_toml(self) -> str:
        """The cluster-table lines that run the Slurm commands on the login node over SSH."""
        return "\n".join([f'login = "{self.login}"', 'ssh_user = "root"',
                          f'ssh_key = "{self.ssh_key}"', f'known_hosts = "{self.known_hosts}"'])

    def netns_inodes(self) -> set[int]:
        return {os.stat(f"/run/netns/{name}").st_ino for name, _ in self.nodes}


def slurm(*argv: str) -> str:
    """A Slurm command's output (SLURM_CONF is the test cluster's); raises on failure."""
    return subprocess.run(list(argv), capture_output=True, text=True, check=True,
                          timeout=60).stdout


@pytest.fixture(scope="session")
def test_slurm() -> Iterator[TestSlurm]:
    """The one Slurm of the session: installed and started once, torn down at the end (kept
    with PPSWEEP_KEEP_TEST_HOSTS=1). Clients find it through SLURM_CONF."""
    if os.geteuid() != 0:
        pytest.skip("the Slurm tests need root: slurmd runs in network namespaces "
                    "(scripts/provision_slurm.sh)")
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run_script("install_slurm.sh")
        run_script("provision_slurm.sh")
    cluster = TestSlurm.load()
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        if not os.environ.get("PPSWEEP_KEEP_TEST_HOSTS"):
            run_script("teardown_slurm.sh")


def node_back(node: str, timeout_s: float = 60) -> None:
    """A node set DOWN by a test is idle again: State=RESUME, asked again until Slurm takes it
    (it refuses while the node's jobs are still completing; a drained node stays out until
    then), within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    state = ""
    while time.monotonic() < deadline:
        state = slurm("sinfo", "--noheader", "--nodes", node, "--format", "%t").strip()
        if state == "idle":
            return
        if state.startswith(("down", "drain", "fail")):
            subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"],
                           capture_output=True, check=False, timeout=60)
        elif state.startswith(("mix", "alloc")) and not slurm(
                "squeue", "--noheader", "--nodelist", node, "--format", "%i").strip():
            # cons_tres with ReturnToService=2 may keep the killed job's CPUs counted on the
            # node (no job listed): cancelling the jobs on the node clears them
            subprocess.run(["scancel", "--quiet", "--nodelist", node], capture_output=True,
                           check=False, timeout=60)
        time.sleep(0.2)
    jobs = slurm("squeue", "--noheader", "--nodelist", node, "--format", "%i %j %T").strip()
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {node} idle again "
                         f"(sinfo: {state}; its jobs: {jobs or 'none'})")


def allocations_granted() -> int:
    """How many allocations slurmctld has granted so far (its log: one line per salloc)."""
    log = ROOT / "ctld" / "slurmctld.log"
    return log.read_text(errors="replace").count("_slurm_rpc_allocate_resources")


def node_processes(cluster: TestSlurm) -> list[str]:
    """Labelled (PPSWEEP_RUN) processes inside the Slurm nodes' namespaces."""
    inodes = cluster.netns_inodes()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry / "ns" / "net").st_ino not in inodes:
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            if not any(e.startswith(f"{RUN_ENV}=".encode()) for e in environ):
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
        except OSError:
            continue
        found.append(f"process {entry.name}: {cmd}")
    return found


# A job cancelled or ended stays in the queue as COMPLETING while its nodes run its epilog: on
# its way out, not left behind. Waited for (bounded) before the queue is judged.
COMPLETING_WAIT_S = 60.0


def _jobs() -> list[str]:
    return [line for line in slurm("squeue", "--noheader", "--format", "%i %j %T").splitlines()
            if line.strip()]


def leftovers(cluster: TestSlurm) -> list[str]:
    """Allocations, steps and labelled processes still there; [] when the cluster is clean. A
    job still COMPLETING is first given :data:`COMPLETING_WAIT_S` to leave the queue; one that
    does not is a leftover."""
    deadline = time.monotonic() + COMPLETING_WAIT_S
    while any(line.endswith(" COMPLETING") for line in _jobs()) and time.monotonic() < deadline:
        time.sleep(0.2)  # bounded polling of the queue
    left = [f"job {line}" for line in _jobs()]
    left += [f"step {line}" for line in slurm("squeue", "--noheader", "--steps", "--format",
                                              "%i %j").splitlines() if line.strip()]
    return left + node_processes(cluster)


def clean(cluster: TestSlurm) -> None:
    with contextlib.suppress(subprocess.CalledProcessError):
        slurm("scancel", "--quiet", "--user", "root")
    for line in node_processes(cluster):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(line.split()[1].rstrip(":")), signal.SIGKILL)


def slurm_cluster_toml(name: str, state: Path, *, nodes: int = 4, scale: float = 1000,
                       extra: str = "", request_gpus: bool = False) -> str:
    """A kind = "slurm" cluster of the emulator (8 GPUs per node, its GPU state in ``state``).
    ``request_gpus``: the allocation and each step ask for the nodes' 8 GPUs (the test Slurm's
    gres gpu:8, without device files); by default they ask none."""
    smi = (f'["env", "PPSWEEP_SIM_STATE_DIR={state}", "{sys.executable}", "-m", '
           '"pytest_ppsweep.sim.smi", "--host", "{host}"]')
    return "\n".join([
        f"[clusters.{name}]",
        'kind = "slurm"',
        f"nodes = {nodes}",
        "gpus_per_node = 8",
        f"request_gpus = {'true' if request_gpus else 'false'}",
        'server_module = "pytest_ppsweep.sim"',
        f'python = "{sys.executable}"',
        "port = 30000",
        "dist_init_port = 20000",
        f"nvidia_smi = {smi}",
        "env = { "
        f'PPSWEEP_SIM_TIME_SCALE = "{scale}", PPSWEEP_SIM_STATE_DIR = "{state}", '
        f'PPSWEEP_SIM_PROFILE = "kimi-k3-6000d", HF_TOKEN = "{SECRET_TOKEN}"'
        " }",
        extra,
    ]) + "\n"


def two_layout_sweep(name: str, model: Path, cluster: str, *, input_len: int, requests: int,
                     repeats: int) -> str:
    """A sweep of PP2/TP8 and PP4/TP4 (16 GPUs: 2 emulated 8-GPU Slurm nodes) on ``cluster``,
    without its cluster table (:func:`slurm_cluster_toml`)."""
    return f"""
[sweep]
name = "{name}"
model_path = "{model}"
cluster = "{cluster}"
ep_cap = 4
boot_timeout_s = 90
spread_rule = "warn"

[server]
chunked_prefill_size = 8192
disable_radix_cache = true

[[configs]]
pp = 2
tp = 8

[[configs]]
pp = 4
tp = 4

[workload]
input_len = {input_len}
output_len = 1
concurrency = [4]
num_requests = {requests}
repeats = {repeats}
vocab_size = 1000
"""
