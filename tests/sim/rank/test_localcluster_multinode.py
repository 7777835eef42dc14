"""Multi-node behaviour with 4 real rank processes on 127.0.9.1-4."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from support.processes import wait_until
from support.sim import ClusterFactory, http, status_of

from pytest_ppsweep.sim.rank.localcluster import LocalCluster

PP4 = ["--tp-size", "2", "--pp-size", "4", "--ep-size", "2"]  # tiny: 4 nodes x 2 GPUs


def exited(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is not None


def test_rank0_phases_refused_then_503_then_200(cluster: ClusterFactory) -> None:
    # the warmup hangs 3000 emulated s (1.5 s real) with a long watchdog: a visible 503 window
    c = cluster(
        4,
        [*PP4, "--watchdog-timeout", "3000000"],
        env={"PPSWEEP_SIM_FAULTS": "watchdog_hang=3000"},
        start=False,
    )
    c.start([0])
    wait_until(lambda: "Init torch distributed begin." in c.log(0), 10, "rank 0 waiting for peers")
    assert status_of(c.base_url + "/health") is None  # refused while loading / waiting
    c.start([1, 2, 3])
    wait_until(lambda: status_of(c.base_url + "/health") == 503, 15, "503 while starting")
    assert "The server is fired up" not in c.log(0)
    wait_until(lambda: status_of(c.base_url + "/health") == 200, 15, "200 after warmup")
    assert "The server is fired up and ready to roll!" in c.log(0)
    for rank in (1, 2, 3):
        url = f"http://{c.hosts[rank]}:{c.port}"
        for path in ("/health", "/health_generate", "/ping"):
            assert http("GET", url + path)[:2] == (200, b"")
        status, body, _ = http("GET", url + "/server_info")
        assert status == 404 and json.loads(body) == {"detail": "Not Found"}
        assert (
            f"Dummy health check server started in background thread at {c.hosts[rank]}:{c.port}"
            in c.log(rank)
        )
        assert "The server is fired up" not in c.log(rank)
    assert "[" in c.log(3) and "PP3 TP1 EP1] Load weight end." in c.log(3)
    assert "PP0 TP0 EP0] Prefill batch" in c.log(0)


def test_never_join_times_out(cluster: ClusterFactory) -> None:
    c = cluster(4, [*PP4, "--dist-timeout", "8000"], env={"PPSWEEP_SIM_FAULTS": "never_join=3"})
    wait_until(lambda: all(exited(p) for p in c.procs), 20, "every rank to exit")
    assert all(p.returncode != 0 for p in c.procs)
    log0 = c.log(0)
    assert "Traceback (most recent call last):" in log0
    assert (
        "torch.distributed.DistStoreError: Timed out after 8001 seconds waiting for clients. "
        "3/4 clients joined." in log0
    )
    assert "DistNetworkError: The client socket has timed out after 8000s" in c.log(3)
    assert status_of(c.base_url + "/health") is None


def test_killed_rank_takes_the_others_down(cluster: ClusterFactory) -> None:
    c = cluster(4, PP4)
    c.wait_healthy(20)
    c.procs[2].kill()
    wait_until(lambda: all(exited(p) for p in c.procs), 10, "survivors to exit")
    assert [p.returncode != 0 for p in c.procs] == [True, True, True, True]
    assert "Connection closed by peer" in c.log(0)
    assert "Rank 2 scheduler is dead" in c.log(0)
    assert "Connection closed by peer" in c.log(1)


def test_sigterm_exits_promptly_and_frees_gpus(cluster: ClusterFactory, state_dir: Path) -> None:
    c = cluster(4, PP4)
    c.wait_healthy(20)
    wait_until(lambda: len(list(state_dir.glob("*.json"))) == 4, 5, "state files")
    doc = json.loads((state_dir / "127.0.9.2.json").read_text())
    assert [g["index"] for g in doc["gpus"]] == [0, 1] and doc["gpus"][0]["used_mib"] > 1000
    t0 = time.monotonic()
    c.procs[0].send_signal(signal.SIGTERM)
    c.procs[0].wait(5)
    assert time.monotonic() - t0 < 1.0
    wait_until(lambda: all(exited(p) for p in c.procs), 5, "followers to stop")
    assert c.procs[1].returncode == 0  # rank 0 broadcast the shutdown
    # the GPUs read free: each node's state keeps only its facts (no rank, no GPU use)
    left = [json.loads(p.read_text()) for p in state_dir.glob("*.json")]
    assert left and all("pid" not in d and "gpus" not in d and d["gpu_count"] for d in left)


def test_sigterm_on_follower_is_prompt(cluster: ClusterFactory) -> None:
    c: LocalCluster = cluster(4, PP4)
    c.wait_healthy(20)
    t0 = time.monotonic()
    c.procs[3].send_signal(signal.SIGTERM)
    c.procs[3].wait(5)
    assert time.monotonic() - t0 < 1.0
    assert "SIGTERM received on node_rank 3" in c.log(3)
    wait_until(lambda: exited(c.procs[0]), 5, "rank 0 to notice")
    assert c.procs[0].returncode != 0


def test_every_rank_echoes_its_boot_token(cluster: ClusterFactory) -> None:
    # The plugin tells its own boot from a stale server by this token (PPSWEEP_BOOT_TOKEN).
    c: LocalCluster = cluster(4, PP4, env={"PPSWEEP_BOOT_TOKEN": "boot-42"})
    c.wait_healthy(20)
    for rank in range(4):
        _status, _body, headers = http("GET", f"http://{c.hosts[rank]}:{c.port}/health")
        assert headers.get("X-PPSweep-Boot-Token") == "boot-42", (rank, headers)
    _status, body, _headers = http("GET", f"{c.base_url}/server_info")
    assert json.loads(body)["ppsweep_sim"]["boot_token"] == "boot-42"
