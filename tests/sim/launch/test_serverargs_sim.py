"""Command line, SGLang's argument checks, fault specs, the nvidia-smi shim."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import DATA
from support.sim import run_sim

from pytest_ppsweep.sim.launch.faults import FaultSpecError, parse_faults
from pytest_ppsweep.sim.launch.serverargs import parse_args, redact_command


def test_help_works() -> None:
    r = run_sim(["--help"])
    assert r.returncode == 0
    for flag in (
        "--tp-size",
        "--pp-max-micro-batch-size",
        "--moe-runner-backend",
        "--dist-init-addr",
    ):
        assert flag in r.stdout


def test_unknown_flag_fails_like_argparse() -> None:
    r = run_sim(["--model-path", "m", "--cuda-graph-max-bs", "8"])
    assert r.returncode == 2
    assert r.stderr.startswith("usage: launch_server.py")
    assert "error: unrecognized arguments: --cuda-graph-max-bs 8" in r.stderr


def test_bad_choice_fails_like_argparse() -> None:
    r = run_sim(["--model-path", "m", "--moe-runner-backend", "nope"])
    assert r.returncode == 2
    assert "argument --moe-runner-backend: invalid choice: 'nope'" in r.stderr


def test_aliases() -> None:
    a = parse_args(
        [
            "--model",
            "m",
            "--tensor-parallel-size",
            "4",
            "--pipeline-parallel-size",
            "2",
            "--ep",
            "2",
            "--nccl-init-addr",
            "h:1",
            "--moe-runner-backend",
            "flashinfer_mxfp4",
        ]
    )
    assert (a.tp_size, a.pp_size, a.ep_size, a.dist_init_addr) == (4, 2, 2, "h:1")
    assert parse_args(["--model-path", "m", "--expert-parallel-size", "4"]).ep_size == 4


def test_nodes_divisibility_message() -> None:
    r = run_sim(
        [
            "--model-path",
            "m",
            "--tp-size",
            "3",
            "--nnodes",
            "2",
            "--dist-init-addr",
            "127.0.9.1:39990",
        ]
    )
    assert r.returncode == 1
    assert "Traceback (most recent call last):" in r.stderr
    assert "AssertionError: tp_size must be divisible by number of nodes" in r.stderr


@pytest.mark.parametrize(
    ("tp", "ep", "needle"),
    [
        (2, 4, "ZeroDivisionError"),
        (6, 4, "AssertionError: tp_size (6) must be divisible by ep_size (4)"),
    ],
)
def test_tp_ep_messages(tp: int, ep: int, needle: str) -> None:
    r = run_sim(["--model-path", "m", "--tp-size", str(tp), "--ep-size", str(ep)])
    assert r.returncode == 1
    assert needle in r.stderr


def test_more_gpus_per_node_than_the_node_has(tmp_path: Path) -> None:
    # tiny profile: 2 GPUs per node; tp=4 on one node takes GPUs 0-3, so TP2 and TP3 fail in
    # torch.cuda.set_device like SGLang on a 2-GPU node
    r = run_sim(
        ["--model-path", "m", "--tp-size", "4", "--host", "127.0.9.1", "--port", "39991"],
        env={"PPSWEEP_SIM_STATE_DIR": str(tmp_path)},
    )
    assert r.returncode == 1
    assert "CUDA error: invalid device ordinal" in r.stdout
    assert r.stdout.count("Scheduler hit an exception: Traceback (most recent call last):") == 2
    assert "get_device().gpu_id=2" in r.stdout and "get_device().gpu_id=3" in r.stdout
    assert "get_device().gpu_id=1 " not in r.stdout
    assert "Init torch distributed begin." not in r.stdout


def test_a_layout_on_part_of_each_node_takes_tp_x_pp_over_nnodes_gpus(tmp_path: Path) -> None:
    # the example on a 2-node launch of the kimi profile (8 GPUs per node): tp 4 x pp 2
    # over 2 nodes takes 4 GPUs per node (SGLang's tp x pp / nnodes), not 8
    from pytest_ppsweep.sim.launch.config import resolve
    from pytest_ppsweep.sim.launch.settings import load_settings
    from pytest_ppsweep.sim.model.placement import local_schedulers
    from pytest_ppsweep.sim.model.profile import load_profile

    args = parse_args(["--model-path", "m", "--tp-size", "4", "--pp-size", "2", "--nnodes", "2",
                       "--dist-init-addr", "127.0.9.1:39990"])  # fmt: skip
    cfg = resolve(args, (), load_settings({}), load_profile("kimi-k3-6000d"))
    assert cfg.layout.gpus_per_node == 4
    for node in (0, 1):
        assert [s.gpu_index for s in local_schedulers(cfg.layout, node)] == [0, 1, 2, 3]


def test_bad_fault_spec_is_rejected() -> None:
    r = run_sim(["--model-path", "m"], env={"PPSWEEP_SIM_FAULTS": "explode"})
    assert r.returncode == 2
    assert "unknown fault 'explode'" in r.stderr


def test_fault_parsing() -> None:
    fs = parse_faults(
        "fail_requests=0.25, crash_mid_bench=5@rank=2,watchdog_hang,slow_start=30@node=1"
    )
    assert fs.get("fail_requests") is not None
    crash = fs.get("crash_mid_bench", 2)
    assert crash is not None and crash.number() == 5
    assert fs.get("crash_mid_bench", 1) is None
    assert fs.get("slow_start", 0) is None
    assert fs.labels() == [
        "fail_requests=0.25",
        "crash_mid_bench=5@rank=2",
        "watchdog_hang",
        "slow_start=30@rank=1",
    ]
    for bad in ("never_join", "wrong_topology=3", "crash_mid_bench=x", "nccl_init@gpu=1"):
        with pytest.raises(FaultSpecError):
            parse_faults(bad)


def test_redaction_of_launch_command() -> None:
    cmd = redact_command(["--model-path", "m", "--api-key", "sekret", "--admin-api-key=x2"])
    assert "sekret" not in cmd and "x2" not in cmd
    assert cmd == "--model-path m --api-key <redacted> --admin-api-key=<redacted>"


def smi(host: str, state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PPSWEEP_SIM_STATE_DIR": str(state_dir),
        "PPSWEEP_SIM_PROFILE": "kimi-k3-6000d",
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest_ppsweep.sim.smi", "--host", host, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=20,
    )


def test_smi_idle_format_like_real_capture(state_dir: Path) -> None:
    real = (DATA / "query_gpu_busy.csv").read_text().splitlines()
    fields = "index,uuid,name,memory.used,memory.total,utilization.gpu,pci.bus_id"
    r = smi("127.0.9.9", state_dir, f"--query-gpu={fields}", "--format=csv")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0] == real[0]  # identical header
    assert len(lines) == 9
    rows = list(csv.reader(io.StringIO(r.stdout), skipinitialspace=True))
    real_row = next(csv.reader(io.StringIO(real[1]), skipinitialspace=True))
    assert [c.split(" ")[-1] for c in rows[1][3:5]] == [c.split(" ")[-1] for c in real_row[3:5]]
    assert rows[1][4] == "85651 MiB" and rows[1][3] == "1 MiB"


def test_smi_noheader_nounits_and_state(state_dir: Path) -> None:
    (state_dir / "127.0.9.8.json").write_text(
        json.dumps(
            {
                "pid": 4242,
                "gpu_count": 8,
                "gpu_name": "NVIDIA RTX 6000D",
                "memory_total_mib": 85651,
                "driver_version": "580.159.04",
                "idle_used_mib": 1,
                "gpus": [{"index": 0, "used_mib": 80000}, {"index": 1, "used_mib": 79000}],
            }
        )
    )
    r = smi(
        "127.0.9.8",
        state_dir,
        "--query-gpu=index,memory.used,memory.total",
        "--format=csv,noheader,nounits",
    )
    assert r.stdout.splitlines()[:3] == ["0, 80000, 85651", "1, 79000, 85651", "2, 1, 85651"]
    r = smi("127.0.9.8", state_dir, "--query-gpu=index,memory.used,memory.total", "--format=csv")
    assert r.stdout.splitlines()[0] == "index, memory.used [MiB], memory.total [MiB]"
    assert r.stdout.splitlines()[1] == "0, 80000 MiB, 85651 MiB"
    apps = smi(
        "127.0.9.8",
        state_dir,
        "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
        "--format=csv",
    )
    real = (DATA / "query_apps_busy.csv").read_text().splitlines()
    assert apps.stdout.splitlines()[0] == real[0]
    assert apps.stdout.splitlines()[1].startswith("4242, python3, 79991 MiB, GPU-")
    assert len(apps.stdout.splitlines()) == 3
    bad = smi("127.0.9.8", state_dir, "--query-gpu=bogus", "--format=csv")
    assert bad.returncode == 2 and 'Field "bogus" is not a valid field to query.' in bad.stdout
