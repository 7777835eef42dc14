"""Every injectable fault, end to end on a 2-node service (tiny profile: tp2 x pp2)."""

from __future__ import annotations

import json
import subprocess
import urllib.error

import pytest
from support.processes import wait_until
from support.sim import ClusterFactory, http, sse_events

PP2 = ["--tp-size", "2", "--pp-size", "2"]


def all_exited(procs: list[subprocess.Popen[bytes]]) -> bool:
    return all(p.poll() is not None for p in procs)


@pytest.mark.parametrize(("fault", "needles"), [
    ("nccl_init", ["Init torch distributed begin.", "NCCL error in:", "ncclInternalError"]),
    ("oom_load", ["Load weight begin.",
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"]),
    ("custom_ar_graph", ["Registering", "Capture cuda graph failed: invalid argument",
                         "custom_all_reduce.cuh:350"]),
])  # fmt: skip
def test_boot_faults_crash_every_rank(
    cluster: ClusterFactory, fault: str, needles: list[str]
) -> None:
    c = cluster(2, PP2, env={"PPSWEEP_SIM_FAULTS": fault})
    wait_until(lambda: all_exited(c.procs), 20, "ranks to exit")
    assert all(p.returncode != 0 for p in c.procs)
    log = c.log(0)
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    for needle in needles:
        assert needle in log, needle
    assert "fired up" not in log


def test_fault_on_one_rank_only(cluster: ClusterFactory) -> None:
    c = cluster(2, PP2, env={"PPSWEEP_SIM_FAULTS": "oom_load@rank=1"})
    wait_until(lambda: all_exited(c.procs), 20, "ranks to exit")
    assert "OutOfMemoryError" in c.log(1) and "OutOfMemoryError" not in c.log(0)
    assert "Connection closed by peer" in c.log(0)


def test_custom_ar_fault_needs_the_decode_graph(cluster: ClusterFactory) -> None:
    c = cluster(
        2, [*PP2, "--disable-decode-cuda-graph"], env={"PPSWEEP_SIM_FAULTS": "custom_ar_graph"}
    )
    c.wait_healthy(20)
    assert "Disable decode CUDA graph" in c.log(0)


def test_watchdog_fires_with_the_default_timeout(cluster: ClusterFactory) -> None:
    c = cluster(2, PP2, env={"PPSWEEP_SIM_FAULTS": "watchdog_hang"})
    wait_until(lambda: all_exited(c.procs), 20, "ranks to exit")
    log = c.log(0)
    assert "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)" in log
    assert "SIGQUIT received. signum=None, frame=None. It usually means one child failed." in log
    assert c.procs[0].returncode != 0 and c.procs[1].returncode != 0


def test_long_watchdog_lets_the_hang_pass(cluster: ClusterFactory) -> None:
    c = cluster(
        2, [*PP2, "--watchdog-timeout", "3000000"], env={"PPSWEEP_SIM_FAULTS": "watchdog_hang=600"}
    )
    c.wait_healthy(20)
    assert "watchdog timeout" not in c.log(0)


def test_crash_mid_bench(cluster: ClusterFactory) -> None:
    c = cluster(2, PP2, env={"PPSWEEP_SIM_FAULTS": "crash_mid_bench=3"})
    c.wait_healthy(20)
    ok = 0
    for _ in range(10):
        try:
            status = http(
                "POST",
                c.base_url + "/generate",
                {"input_ids": [1] * 32, "sampling_params": {"max_new_tokens": 1}},
                timeout=5,
            )[0]
        except (urllib.error.URLError, OSError):
            break
        ok += status == 200
    wait_until(lambda: all_exited(c.procs), 10, "ranks to exit")
    assert ok >= 3
    assert c.procs[1].returncode != 0 and c.procs[0].returncode != 0
    assert "illegal memory access" in c.log(1)
    assert "Rank 1 scheduler is dead" in c.log(0)


def test_fail_requests(cluster: ClusterFactory) -> None:
    c = cluster(1, ["--tp-size", "2"], env={"PPSWEEP_SIM_FAULTS": "fail_requests=0.5"})
    c.wait_healthy(20)
    outcomes = []
    for _ in range(40):
        status, body, _ = http(
            "POST",
            c.base_url + "/generate",
            {"input_ids": [1] * 16, "sampling_params": {"max_new_tokens": 1}, "stream": True},
        )
        if status == 500:
            assert "error" in json.loads(body)
            outcomes.append("http500")
            continue
        events = sse_events(body)
        assert status == 200 and events[-1] == "[DONE]"
        first = json.loads(events[0])
        outcomes.append("stream_error" if "error" in first else "ok")
    assert {"http500", "stream_error", "ok"} <= set(outcomes)
    info = json.loads(http("GET", c.base_url + "/server_info")[1])
    assert info["ppsweep_sim"]["faults"] == ["fail_requests=0.5"]


def test_fail_request_n_fails_that_request_alone(cluster: ClusterFactory) -> None:
    faults = "fail_request_n=3,fail_request_n=5"
    c = cluster(1, ["--tp-size", "2"], env={"PPSWEEP_SIM_FAULTS": faults})
    c.wait_healthy(20)
    statuses = [http("POST", c.base_url + "/generate",
                     {"input_ids": [1] * 16, "sampling_params": {"max_new_tokens": 1}})[0]
                for _ in range(6)]
    assert statuses == [200, 200, 500, 200, 500, 200]


def test_wrong_topology(cluster: ClusterFactory) -> None:
    c = cluster(2, PP2, env={"PPSWEEP_SIM_FAULTS": "wrong_topology"})
    c.wait_healthy(20)
    info = json.loads(http("GET", c.base_url + "/server_info")[1])
    assert (info["tp_size"], info["pp_size"]) != (2, 2)
    assert info["internal_states"][0]["pp_size"] == info["pp_size"]


def test_slow_start(cluster: ClusterFactory) -> None:
    c = cluster(2, PP2, env={"PPSWEEP_SIM_FAULTS": "slow_start=3000@rank=1"})  # 1.5 s real
    wait_until(lambda: "Init torch distributed begin." in c.log(0), 10)
    assert "Init torch distributed begin." not in c.log(1)
    c.wait_healthy(30)
    assert "Init torch distributed begin." in c.log(1)
