"""Plain helpers of the remote-backend tests: the provisioned test hosts, matrices for them, and
what a host still runs (containers and rank processes) after a scenario."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from pytest_ppsweep.cluster.labels import RUN_ENV, RUN_LABEL
from support.matrices import CONFIGS, SMALL_WORKLOAD, replace_once, seed_text
from support.paths import SCRIPTS

IMAGE = "local/ppsweep-sim:test"
ROOT = Path(os.environ.get("PPSWEEP_TEST_HOSTS", "/tmp/ppsweep-test-hosts"))
SECRET_TOKEN = "hf_not-a-real-token-1234"  # a secret env value that must never be written out


@dataclass(frozen=True)
class TestHosts:
    """The namespace hosts h601-h604 made by scripts/provision_test_hosts.sh."""

    __test__ = False  # not a test class

    root: Path
    hosts: tuple[tuple[str, str], ...]  # (name, address)
    ssh_key: str
    known_hosts: str
    sudo_user: str
    sudo_password_file: str
    sockets: dict[str, str] = field(default_factory=dict)  # name -> unix:// socket of its dockerd

    @classmethod
    def load(cls, root: Path = ROOT) -> TestHosts:
        env = dict(
            line.split("=", 1)
            for line in (root / "test-hosts.env").read_text().splitlines()
            if "=" in line
        )
        pairs = [p.split("=", 1) for p in env["HOSTS"].split(",")]
        sockets = dict(p.split("=", 1) for p in env.get("DOCKER_SOCKETS", "").split(",") if p)
        return cls(
            root=root,
            hosts=tuple((n, a) for n, a in pairs),
            ssh_key=env["SSH_KEY"],
            known_hosts=env["KNOWN_HOSTS"],
            sudo_user=env["SUDO_USER"],
            sudo_password_file=env["SUDO_PASSWORD_FILE"],
            sockets=sockets,
        )

    @property
    def password(self) -> str:
        return Path(self.sudo_password_file).read_text().strip()

    def hosts_toml(self) -> str:
        return "[" + ", ".join(f'{{ name = "{n}", address = "{a}" }}' for n, a in self.hosts) + "]"

    def netns_inodes(self) -> set[int]:
        return {os.stat(f"/run/netns/{name}").st_ino for name, _ in self.hosts}


def run_script(name: str, *args: str, timeout: float = 900) -> tuple[float, str]:
    """Run scripts/<name>; returns (seconds, output); raises with the output on failure."""
    t0 = time.monotonic()
    proc = subprocess.run(
        ["bash", str(SCRIPTS / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/{name} {' '.join(args)} exited {proc.returncode}:\n{out}")
    return time.monotonic() - t0, out


# -- what is left on the hosts ------------------------------------------------------------------


def container_events(sock: str, since: float, label: str,
                     actions: tuple[str, ...] = ("create", "destroy")) -> list[dict[str, Any]]:
    """The dockerd at ``sock``'s events of containers labelled ``label`` since ``since`` (a
    ``time.time()``), those of ``actions`` only. dockerd's ``since`` is in whole seconds: the
    events of the second before ``since`` (another run's containers, on a fast machine) are
    dropped by their nanosecond time."""
    client = docker.DockerClient(base_url=sock, version="1.41")
    try:
        events = client.events(since=int(since), until=int(time.time() + 1), decode=True,
                               filters={"type": "container", "label": label})
        return [e for e in events
                if e["Action"] in actions and int(e["timeNano"]) >= int(since * 1e9)]
    finally:
        client.close()


def containers(hosts: TestHosts) -> dict[str, list[str]]:
    """Rank containers (label ppsweep.run) on each host, through its dockerd's local socket."""
    out: dict[str, list[str]] = {}
    for name, sock in hosts.sockets.items():
        client = docker.DockerClient(base_url=sock, version="1.41")
        try:
            found = client.containers.list(all=True, filters={"label": RUN_LABEL})
            if found:
                out[name] = [f"{c.name} ({c.status})" for c in found]
        finally:
            client.close()
    return out


@dataclass(frozen=True)
class RankProcess:
    """A labelled process seen from here: ids in the root PID namespace and on its host."""

    pid: int
    pgid: int
    host_pid: int  # as the host (its own PID namespace) numbers it
    host_pgid: int
    cmd: str


def rank_processes(hosts: TestHosts) -> list[RankProcess]:
    """Labelled rank processes inside the hosts' network namespaces (the root PID namespace
    sees every host's processes)."""
    inodes = hosts.netns_inodes()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry / "ns" / "net").st_ino not in inodes:
                continue
            if f"{RUN_ENV}=".encode() not in (entry / "environ").read_bytes():
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:300]
            status = dict(
                line.split(":", 1) for line in (entry / "status").read_text().splitlines()
            )
            pgid = os.getpgid(int(entry.name))
        except (OSError, ProcessLookupError, ValueError):
            continue
        host_pid = int(status["NSpid"].split()[-1])
        host_pgid = int(status["NSpgid"].split()[-1])
        found.append(RankProcess(int(entry.name), pgid, host_pid, host_pgid, cmd))
    return found


def leftovers(hosts: TestHosts) -> list[str]:
    """Everything a scenario left behind, described; [] when the hosts are clean."""
    left = [f"{h}: container {c}" for h, cs in containers(hosts).items() for c in cs]
    left += [f"process {p.pid} (group {p.pgid}): {p.cmd}" for p in rank_processes(hosts)]
    return left


def clean(hosts: TestHosts) -> None:
    """Remove every rank container and process group from the hosts (after a failed check)."""
    for sock in hosts.sockets.values():
        client = docker.DockerClient(base_url=sock, version="1.41")
        try:
            for c in client.containers.list(all=True, filters={"label": RUN_LABEL}):
                c.remove(force=True)
        finally:
            client.close()
    for proc in rank_processes(hosts):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pgid, signal.SIGKILL)




# -- matrices -------------------------------------------------------------------------------------


def cluster_toml(
    hosts: TestHosts,
    *,
    name: str,
    launcher: str,
    state: Path,
    scale: float,
    user: str = "root",
    sudo: bool = False,
    port: int = 30000,
) -> str:
    """A cluster table for the namespace hosts; the emulator's GPU state lives in ``state``."""
    smi = (
        f'["env", "PPSWEEP_SIM_STATE_DIR={state}", "{sys.executable}", "-m", '
        '"pytest_ppsweep.sim.smi", "--host", "{host}"]'
    )
    lines = [
        f"[clusters.{name}]",
        'kind = "ssh"',
        f'launcher = "{launcher}"',
        f"hosts = {hosts.hosts_toml()}",
        "gpus_per_node = 8",
        'server_module = "pytest_ppsweep.sim"',
        # docker: the image's python; process: this interpreter, on the hosts' shared file system
        f'python = "{"python3" if launcher == "docker" else sys.executable}"',
        f"port = {port}",
        f"dist_init_port = {port - 10000}",
        f'ssh_user = "{user}"',
        f'ssh_key = "{hosts.ssh_key}"',
        f'known_hosts = "{hosts.known_hosts}"',
        f"nvidia_smi = {smi}",
        "env = { "
        f'PPSWEEP_SIM_TIME_SCALE = "{scale}", PPSWEEP_SIM_STATE_DIR = "{state}", '
        f'PPSWEEP_SIM_PROFILE = "kimi-k3-6000d", HF_TOKEN = "{SECRET_TOKEN}"'
        " }",
    ]
    if sudo:
        lines.append(f'sudo_password_file = "{hosts.sudo_password_file}"')
    if launcher == "docker":
        lines += ['shm_size = "1g"', f'mounts = ["{state}"]']
    return "\n".join(lines) + "\n"





def seed_matrix(cluster: str, model: Path, devices: Path) -> str:
    """The seeds' sweep file, pointed at the test hosts (model path, device, default cluster)."""
    text = seed_text()
    text = replace_once(text, 'model_path = "/data/hf_models/Kimi-K3"', f'model_path = "{model}"')
    text = replace_once(text, 'devices = ["/dev/infiniband"]',
                        f'devices = ["{devices}:/dev/infiniband"]')
    text = replace_once(text, 'cluster = "local"', f'cluster = "{cluster}"')
    # not about spread: ranks over SSH on a loaded machine are noisier than the seeds' 2 %
    return replace_once(text, "spread_threshold = 0.02",
                        'spread_threshold = 0.02\nspread_rule = "warn"')


def small_matrix(
    cluster: str, model: Path, devices: Path | None, configs: str = CONFIGS
) -> str:
    """Two layouts, a short workload; ``devices`` stands in for /dev/infiniband."""
    dev = f'devices = ["{devices}:/dev/infiniband"]\n' if devices else ""
    return (
        f'[sweep]\nname = "remote"\nmodel_path = "{model}"\ncluster = "{cluster}"\nep_cap = 4\n'
        f'boot_timeout_s = 60\nspread_rule = "warn"\n{dev}\n'
        "[server]\nchunked_prefill_size = 8192\ndisable_radix_cache = true\n"
        f"{configs}{SMALL_WORKLOAD}"
    )


def make_device_dir(base: Path) -> Path:
    """A stand-in for /dev/infiniband: a folder holding one char device (1:3, like /dev/null)."""
    folder = base / "infiniband"
    folder.mkdir(parents=True, exist_ok=True)
    node = folder / "uverbs0"
    if not node.exists():
        os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))
    return folder


# A rank that says what it got (environment, SIGINT handling) and ticks until stopped.
TICKER = (
    "import os, signal, subprocess, time\n"
    "child = subprocess.Popen(['sleep', '300'])\n"
    "print('env', os.environ.get('GREETING'), os.environ.get('PPSWEEP_RUN'), flush=True)\n"
    "print('sigint', signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True)\n"
    "for i in range(3000):\n"
    "    print('tick', i, flush=True)\n"
    "    time.sleep(0.1)\n"
)


def assert_container_rank_shape(launcher: Any, node: tuple[str, str], labels: dict[str, str],
                                tmp_path: Path, model: Path, devices: Path, state: Path) -> str:
    """One container rank started by a docker ``launcher`` (over ssh:// or on this machine's
    daemon) on ``node`` (name, address): its log streams, its container has the shape asked
    (host network and IPC, 1 GiB shm, init, GPUs, devices, read-only model, state mount, its
    environment and command), SIGTERM stops it at once; returns its docker run line (secrets
    redacted), checked for the parts every launcher writes."""
    from pytest_ppsweep.cluster.rankspec import RankSpec
    from support.processes import wait_until

    def lines(path: Path) -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    code = ("import os\nprint(sorted(os.listdir('/dev/infiniband')), os.path.isdir("
            + repr(str(model)) + "))\n" + TICKER)
    env = {"GREETING": "hi there", "HF_TOKEN": SECRET_TOKEN}
    spec = RankSpec(1, node[0], node[1], ("python3", "-c", code), env)
    log = tmp_path / "service" / "node1.log"
    rank = launcher.start(spec, log, labels)
    name = f"ppsweep-{labels[RUN_LABEL]}-pp4-tp8-ep4-node1"
    try:
        wait_until(lambda: len(lines(log)) >= 10, 30, "10 streamed log lines")
        assert lines(log)[:3] == ["['uverbs0'] True", "env hi there None", "sigint True"]
        assert rank.poll() is None
        attrs = rank.container.client.api.inspect_container(rank.name)
        host_config, config = attrs["HostConfig"], attrs["Config"]
        assert rank.name == name
        assert labels.items() <= config["Labels"].items()
        assert host_config["NetworkMode"] == "host" and host_config["IpcMode"] == "host"
        assert host_config["ShmSize"] == 1024**3 and host_config["Init"] is True
        assert host_config["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
        assert host_config["DeviceRequests"][0]["Count"] == -1
        assert {(d["PathOnHost"], d["PathInContainer"]) for d in host_config["Devices"]} == {
            (str(devices), "/dev/infiniband"),
            ("/dev/null", "/dev/null"),
        }
        assert f"{model}:{model}:ro" in host_config["Binds"]
        assert f"{state}:{state}:rw" in host_config["Binds"]
        assert f"HF_TOKEN={SECRET_TOKEN}" in config["Env"]  # the rank gets its environment
        assert config["Cmd"] == ["python3", "-c", code]
    finally:
        t0 = time.monotonic()
        rc = rank.stop(grace_s=5)
    assert rc == 143 and time.monotonic() - t0 < 5  # init=True: SIGTERM reaches python at once
    assert rank.stop() == 143
    # the equivalent docker run line, next to the log, secrets redacted
    line = (log.parent / "node1.docker-run.sh").read_text()
    for part in (
        f"docker run -d --name {name}",
        f"--label ppsweep.run={labels[RUN_LABEL]}",
        "--init --network host --ipc host --shm-size 1g --gpus all",
        f"--device {devices}:/dev/infiniband:rwm",
        f"-v {model}:{model}:ro",
        "-e 'HF_TOKEN=<redacted>'",
        f"{IMAGE} python3 -c",
    ):
        assert part in line, f"{part!r} not in {line}"
    assert SECRET_TOKEN not in line
    return line
