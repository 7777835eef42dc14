"""Real SGLang 0.5.23 (CPU) in Docker over SSH across two test hosts: the users' deployment path
(one SGLang container per host, `docker run` on each over SSH) with the real engine, not the
emulator (issue 38 point 1).

The image is small (scripts/build_sglang_image.sh: the emulator image's Debian root; the
provisioned environment and the tiny models bind-mounted read-only, the cluster's ``mounts``).
Each rank runs in a container on its own namespace host (h601, h602), with its own sshd and
dockerd; gloo goes over the hosts' eth0.

Two sweep runs serve the first tests (``docker_sweep``, one real boot each): PP2 across the hosts
passes with everything the emulator's Docker-over-SSH test asserts (topology, N/N, log scan,
teardown, no container left), then PP2 again has node 1's scheduler killed in the middle of its
round and the failure names that rank on its host. (TP2 across the two hosts does not boot
with SGLang 0.5.23 on CPU here: it hangs after "Setup Custom allreduce failed" until the boot
timeout, so the kill is made on the layout that boots.) The last tests need no boot:
a misspelt server flag is refused by SGLang's own parser, run where the engine runs (in the
image on node 0; over SSH for processes), before any rank starts, in the preflight and in the
dry run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.matrices import replace_once
from support.paths import ACCEPTANCE
from support.real import (
    READINESS_WORKAROUND,
    Provisioned,
    kill_marked,
    marked_processes,
    messages,
    node_processes,
    outcomes,
    sweep_toml,
)
from support.remote import TestHosts, container_events, containers, rank_processes
from support.runs import rows, run_dir
from support.shared_fixtures import SglangImage

from pytest_ppsweep.cluster.labels import RUN_LABEL

pytestmark = pytest.mark.slow

CLEAN = KILLED = "pp2-tp1-ep1"
LAYOUTS = """
[[configs]]
pp = 2
tp = 1
"""
PORT, DIST_PORT = 34500, 35500  # the hosts' own network namespaces: nothing else listens there
TYPO = "chunked_prefil_size = 4096"


def _cluster_table(text: str, hosts: TestHosts, image: SglangImage, launcher: str) -> str:
    """test_matrix/cpu.toml's cluster (after support.real.sweep_toml) moved onto h601 and h602:
    ssh + ``launcher``, the hosts' key, gloo on their eth0, the image's read-only mounts."""
    two = "[" + ", ".join(f'{{ name = "{n}", address = "{a}" }}' for n, a in hosts.hosts[:2]) + "]"
    text = replace_once(text, 'kind = "local"\nhosts = ["127.0.6.1", "127.0.6.2", "127.0.6.3", '
                        '"127.0.6.4"]',
                        f'kind = "ssh"\nlauncher = "{launcher}"\nhosts = {two}\n'
                        f'ssh_user = "root"\nssh_key = "{hosts.ssh_key}"\n'
                        f'known_hosts = "{hosts.known_hosts}"\n'
                        + (f"shm_size = \"1g\"\nmounts = {json.dumps(list(image.mounts))}"
                           if launcher == "docker" else ""))
    return replace_once(text, 'GLOO_SOCKET_IFNAME = "lo"', 'GLOO_SOCKET_IFNAME = "eth0"')


def _folder(base: Path, prov: Provisioned, hosts: TestHosts, image: SglangImage, mark: str,
            launcher: str = "docker", typo: bool = False) -> Path:
    text = sweep_toml(prov, port=PORT, dist_port=DIST_PORT, mark=mark, configs=LAYOUTS,
                      model="tiny-llama-h4", baseline=CLEAN, concurrency=[2], repeats=2,
                      num_requests=24, request_timeout_s=60, round_timeout_s=240)
    text = _cluster_table(text, hosts, image, launcher)
    if typo:
        text = replace_once(text, "[server]\n", f"[server]\n{TYPO}\n")
    base.mkdir(parents=True)
    (base / "ppsweep.toml").write_text(text)
    (base / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    (base / "conftest.py").write_text(READINESS_WORKAROUND)
    return base


def _pytest(folder: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", str(folder), "-p", "no:cacheprovider", *args]


def _rank_events(hosts: TestHosts, since: float) -> dict[str, list[str]]:
    """Every create/destroy of a rank container (label ppsweep.run) on each host since
    ``since``, as its dockerd recorded it."""
    return {name: [f"{e['Action']} {e['Actor']['Attributes'].get('name', '')}"
                   for e in container_events(sock, since, RUN_LABEL)]
            for name, sock in hosts.sockets.items()}


@dataclass(frozen=True)
class DockerSweep:
    """What the two sweeps left: the clean one's outcomes, output and run folder, the killed
    one's (and what was killed), the rank containers' events of both and what was left on the
    hosts after them."""

    seen: dict[str, str]
    why: dict[str, str]
    out: str
    run: Path
    killed: str
    killed_seen: dict[str, str]
    killed_why: dict[str, str]
    killed_out: str
    killed_run: Path
    events: dict[str, list[str]]
    left_containers: dict[str, list[str]]
    left_processes: list[tuple[int, str]]
    seconds: float


def _kill_node_1_mid_round(proc: subprocess.Popen[bytes], reports: Path, mark: str) -> str:
    """Once a measured request of the layout completed, SIGKILL node 1's scheduler (in its
    container on h602; the root PID namespace sees it by the mark in its environment)."""
    deadline = time.monotonic() + 420  # one boot (up to boot_timeout_s 300) and its first round
    raw = None
    while time.monotonic() < deadline and proc.poll() is None:
        runs = [p for p in reports.iterdir() if p.is_dir()] if reports.exists() else []
        raw = runs[0] / "raw" / KILLED / "c2-r1.jsonl" if runs else None
        if raw is not None and raw.exists() and raw.read_text().strip():
            break
        time.sleep(0.02)
    if proc.poll() is not None or raw is None or not raw.exists():
        return ""  # never reached: test_a_rank_killed_mid_round_is_named_on_its_host says so
    procs = node_processes(mark, 1)
    workers = [(pid, cmd) for pid, cmd in procs if "scheduler" in cmd]
    assert procs, "no process of node 1 found"
    victim = (workers or procs)[0]
    os.kill(victim[0], signal.SIGKILL)
    return f"{victim[0]} {victim[1]}"


@pytest.fixture(scope="module")
def docker_sweep(test_hosts: TestHosts, sglang_image: SglangImage, sglang_cpu: Provisioned,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerSweep]:
    base = tmp_path_factory.mktemp("real-docker")
    t0, since = time.monotonic(), time.time()
    swept = []
    for name, kill in (("clean", False), ("killed", True)):
        mark = f"dock{name}{os.getpid()}"
        folder = _folder(base / name / "sweep", sglang_cpu, test_hosts, sglang_image, mark)
        reports, junit = base / name / "reports", base / name / "junit.xml"
        proc = subprocess.Popen(
            _pytest(folder, "-v", "--ppsweep-image", sglang_image.tag, "--ppsweep-reports",
                    str(reports), f"--junitxml={junit}"),
            cwd=base, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            killed = _kill_node_1_mid_round(proc, reports, mark) if kill else ""
            out, _ = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # the plugin stops its ranks on SIGTERM
                proc.wait(timeout=60)
        swept.append((outcomes(junit), messages(junit), out.decode(errors="replace"),
                      run_dir(reports), killed, mark))
    took = time.monotonic() - t0
    left = containers(test_hosts)
    (seen, why, out_clean, run_clean, _, mark_a), (kseen, kwhy, kout, krun, killed, mark_b) = swept
    yield DockerSweep(seen, why, out_clean, run_clean, killed, kseen, kwhy, kout, krun,
                      _rank_events(test_hosts, since), left,
                      kill_marked(mark_a) + kill_marked(mark_b), took)
    print(f"real SGLang in Docker over SSH, two boots: {took:.1f} s")


def test_pp2_across_two_hosts_in_containers_passes(docker_sweep: DockerSweep) -> None:
    """Everything the emulator's Docker-over-SSH sweep asserts, on the real engine: every test
    of the layout passes (topology from the real /server_info, N/N rounds, a clean log scan),
    each node's log streamed from its container on its own host, the docker run lines, and
    the teardown left no container and no process."""
    seen, run, text = docker_sweep.seen, docker_sweep.run, docker_sweep.out[-8000:]
    assert {t: o for t, o in seen.items() if CLEAN in t} == {
        f"test_topology[{CLEAN}]": "passed",
        f"test_prefill[{CLEAN}-c2]": "passed",
        f"test_valid[{CLEAN}-c2]": "passed",
        f"test_outputs_match[{CLEAN}]": "passed",
        f"test_logs_clean[{CLEAN}]": "passed",
        f"test_gpu_memory[{CLEAN}]": "skipped",  # nvidia_smi = []: no GPUs
    }, text
    info = json.loads((run / "metadata" / f"{CLEAN}.server_info.json").read_text())
    assert (info["pp_size"], info["tp_size"], info["nnodes"]) == (2, 1, 2)
    assert info["version"] == "0.5.23" and "ppsweep_sim" not in info
    config = {r["config_id"]: r for r in rows(run / "configs.csv")}[CLEAN]
    assert config["boot_ok"] == "True" and config["topology_ok"] == "True"
    assert config["log_clean"] == "True" and float(config["held_s"]) > 0
    results = [r for r in rows(run / "results.csv") if r["config_id"] == CLEAN]
    assert [(r["concurrency"], r["repeat"]) for r in results] == [("2", "1"), ("2", "2")]
    for r in results:  # N/N, real timing
        assert r["completed"] == r["num_requests"] == "24" and r["failed"] == "0", r
        assert r["simulated"] == "False"
    service = run / "service" / CLEAN
    assert sorted(p.name for p in service.iterdir()) == [
        "launch.sh", "node0.docker-run.sh", "node0.log", "node1.docker-run.sh", "node1.log"]
    for r, (name, address) in enumerate((("h601", "10.200.0.101"), ("h602", "10.200.0.102"))):
        line = (service / f"node{r}.docker-run.sh").read_text()
        assert line.startswith(f"# node{r} ({name}): DOCKER_HOST=ssh://root@{address}\n"), line
        assert f"--label ppsweep.run={run.name}" in line and "--network host --ipc host" in line
        for mount in docker_sweep_mounts(line):
            assert mount.endswith(":ro"), line
        log = (service / f"node{r}.log").read_text(errors="replace")
        assert "type=LlamaForCausalLM" in log or "LlamaForCausalLM" in log, log[-2000:]
        assert f"--node-rank {r}" in (service / "launch.sh").read_text()
    assert "The server is fired up and ready to roll!" in (service / "node0.log").read_text()
    nodes = json.loads((run / "metadata" / "nodes-cpu.json").read_text())
    assert [n["hostname"] for n in nodes["nodes"]] == ["h601", "h602"]
    assert all(n["image_id"].startswith("sha256:") for n in nodes["nodes"])
    # the teardown: every rank container created was removed, none is left, no process either
    for host in ("h601", "h602"):
        created = [e.split()[1] for e in docker_sweep.events[host] if e.startswith("create")]
        destroyed = [e.split()[1] for e in docker_sweep.events[host] if e.startswith("destroy")]
        assert len(created) == 2 and sorted(created) == sorted(destroyed), docker_sweep.events
    assert docker_sweep.left_containers == {} and docker_sweep.left_processes == []


def docker_sweep_mounts(line: str) -> list[str]:
    """The ``-v`` mounts of a docker run line."""
    return re.findall(r"-v (\S+)", line)


def test_a_rank_killed_mid_round_is_named_on_its_host(docker_sweep: DockerSweep) -> None:
    """PP2 across the hosts, node 1's scheduler SIGKILLed in its container on h602 during the
    round: the round is cut at once and the layout's failure names node 1 on h602's address;
    the later tests of the layout end with the same cause; its containers are gone too."""
    seen, why = docker_sweep.killed_seen, docker_sweep.killed_why
    text = docker_sweep.killed_out[-8000:]
    assert docker_sweep.killed, f"no round of {KILLED} to kill a rank in:\n{text}"
    assert seen[f"test_topology[{KILLED}]"] == "passed", text
    assert seen[f"test_prefill[{KILLED}-c2]"] == "failed", f"killed {docker_sweep.killed}\n{text}"
    prefill = why[f"test_prefill[{KILLED}-c2]"]
    assert f"{KILLED}: layout dead: node 1 (10.200.0.102)" in prefill, prefill[-3000:]
    assert "round c2 r1/2 aborted" in prefill, prefill[-3000:]
    cause = prefill.split("; round c2")[0]
    assert seen[f"test_logs_clean[{KILLED}]"] == "error"
    assert cause in why[f"test_logs_clean[{KILLED}]"]
    result = [r for r in rows(docker_sweep.killed_run / "results.csv")
              if r["config_id"] == KILLED]
    assert not [r for r in result if r["completed"] == r["num_requests"]], result
    assert (docker_sweep.killed_run / "service" / KILLED / "node1.log").is_file()


def _refused(result: subprocess.CompletedProcess[str], where: str) -> str:
    err = result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-3000:] + err
    assert (f"h601 (10.200.0.101): {where}" in err and "key 'server.chunked_prefil_size': "
            "expected a flag of sglang.launch_server (did you mean 'chunked_prefill_size'?), "
            "found --chunked-prefil-size, which its argument parser does not accept" in err), err
    return err


def test_a_misspelt_flag_is_refused_in_the_image_before_any_container_starts(
    test_hosts: TestHosts, sglang_image: SglangImage, sglang_cpu: Provisioned, tmp_path: Path
) -> None:
    """SGLang's own parser, run in the image on node 0 (a throwaway container with the ranks'
    mounts), knows the flag is misspelt: the dry run and the run's preflight refuse it, with
    the suggestion from SGLang's own list of flags; no rank container is ever created."""
    mark = f"typo{os.getpid()}"
    folder = _folder(tmp_path / "sweep", sglang_cpu, test_hosts, sglang_image, mark, typo=True)
    reports = tmp_path / "reports"
    since = time.time()
    dry = subprocess.run(_pytest(folder, "--ppsweep-image", sglang_image.tag, "--ppsweep-reports",
                                 str(reports), "--ppsweep-dry-run"),
                         cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert dry.returncode == pytest.ExitCode.USAGE_ERROR, dry.stdout[-3000:] + dry.stderr
    # the dry run opens no connection: checked offline against the kept flag list
    assert (f"{folder / 'ppsweep.toml'}: key 'server.chunked_prefil_size': expected a flag of "
            "sglang.launch_server 0.5.23 (did you mean 'chunked_prefill_size'?)") in dry.stderr
    assert ("--ppsweep-dry-run: the server flags of cluster 'cpu' have 1 problem(s), found by "
            "the offline check") in dry.stderr, dry.stderr
    done = subprocess.run(_pytest(folder, "--ppsweep-image", sglang_image.tag, "--ppsweep-reports",
                                  str(reports)),
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    err = _refused(done, f"{folder / 'ppsweep.toml'}")
    assert "found 1 problem(s) on 1 of 2 node(s); nothing was started" in err, err
    assert _rank_events(test_hosts, since) == {h: [] for h in test_hosts.sockets}
    assert not reports.exists() or not any(reports.iterdir())
    assert not marked_processes(mark)


def test_a_misspelt_flag_is_refused_over_ssh_for_processes(
    test_hosts: TestHosts, sglang_image: SglangImage, sglang_cpu: Provisioned, tmp_path: Path
) -> None:
    """ssh + process: the parser runs over SSH on node 0 with the ranks' interpreter and
    environment; the preflight refuses the flag and no rank process starts on any host."""
    mark = f"ptypo{os.getpid()}"
    folder = _folder(tmp_path / "sweep", sglang_cpu, test_hosts, sglang_image, mark,
                     launcher="process", typo=True)
    reports = tmp_path / "reports"
    done = subprocess.run(_pytest(folder, "--ppsweep-reports", str(reports)), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    err = _refused(done, f"{folder / 'ppsweep.toml'}")
    assert "nothing was started" in err
    assert rank_processes(test_hosts) == [] and not marked_processes(mark)
    assert not reports.exists() or not any(reports.iterdir())
