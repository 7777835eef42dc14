"""The comm worker for real: torch.distributed over gloo across the `cpu` cluster's 4 loopback
nodes, with the provisioned torch of the real-SGLang venv (the server's Python and env).

test_comm runs on its own, the service never booted: PP1/TP4 (4 nodes) and PP2/TP2 (2 nodes)
give plausible monotone latencies with verified sums; PP4/TP1 has no all-reduce. A wrong sum, a
hang and an init failure fail with the node and rank. Addresses 127.0.42.21-24, ports
42200-42212 (this suite's comm range). Run under `flock /tmp/ppsweep-sglang.lock`."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.matrices import cpu_text
from support.paths import ACCEPTANCE, REPO
from support.real import ProvisionImpossible, provision
from support.runs import run_dir

from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.comm.runner import CommFailed, run_comm
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.commspec import CommSpec
from pytest_ppsweep.matrix.parse import load

pytestmark = pytest.mark.machine  # torch's gloo from the provisioned SGLang environment

CPU = REPO / "test_matrix" / "cpu.toml"
HOSTS = [f"127.0.42.{21 + i}" for i in range(4)]
COMM = """
[comm]
max_size = "32M"
warmup_iters = 2
iters = 5
timeout_s = 60
"""


@pytest.fixture(scope="module")
def torch_python() -> str:
    try:
        return provision().python
    except ProvisionImpossible as exc:
        pytest.skip(f"no provisioned SGLang/torch venv: {exc}")


def _matrix(tmp_path: Path, python: str, comm: str = COMM) -> Path:
    text = cpu_text()
    for i, host in enumerate(HOSTS):
        text = text.replace(f"127.0.6.{i + 1}", host)
    text = (text.replace("port = 34000", "port = 42200")
            .replace("dist_init_port = 35000", "dist_init_port = 42210")
            .replace('python = "~/.cache/pytest-ppsweep/venv-sglang-0.5.23/bin/python"',
                     f'python = "{python}"'))
    path = tmp_path / "cpu.toml"
    path.write_text(text + comm)
    return path


def test_comm_with_gloo_on_four_loopback_nodes(tmp_path: Path, torch_python: str) -> None:
    reports = tmp_path / "reports"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(ACCEPTANCE), "--ppsweep-matrix",
         str(_matrix(tmp_path, torch_python)), "--ppsweep-reports", str(reports),
         "-p", "no:cacheprovider", "-vv", "-k", "test_comm"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "test_comm[pp1-tp4-ep1] PASSED" in out and "test_comm[pp2-tp2-ep1] PASSED" in out
    assert "test_comm[pp4-tp1-ep1] SKIPPED" in out  # TP1: no all-reduce
    run = run_dir(reports)  # (beside it: the history, reports/history.sqlite)
    with (run / "comm.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    by: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by.setdefault(r["config_id"], []).append(r)
    assert sorted(by) == ["pp1-tp4-ep1", "pp2-tp2-ep1"]
    for cid, world, label in (("pp1-tp4-ep1", "4", "4 nodes"), ("pp2-tp2-ep1", "2", "2 nodes")):
        got = by[cid]
        assert [int(r["size_bytes"]) for r in got] == [1024 << i for i in range(16)]
        assert {(r["backend"], r["world_size"], r["label"], r["wrong"]) for r in got} == {
            ("gloo", world, label, "0")}
        assert all(float(r["time_us"]) > 0 for r in got), got
        # plausible and monotone at the scale that survives a loaded 2-core machine (seen: a
        # load average of 20): on the median iteration (a preempted one moves the mean), 32 MiB
        # is the slowest size but for noise, costs several times 1 KiB (gloo on this machine's
        # loopback: ~4 ms at 1 KiB, ~9 ms at 4 MiB, ~60 ms at 32 MiB, bandwidth-bound), and the
        # bandwidth-bound sizes (8-32 MiB) are slower than the latency-bound ones (1-64 KiB).
        # Between 64 KiB and 4 MiB gloo is still near its latency floor (4-9 ms), so under load
        # those are not ordered (seen in CI: 6.3 ms at 8 KiB, 7.2 ms at 32 KiB, 7.7 ms at 1 MiB)
        times = [float(r["time_p50_us"]) for r in got]
        assert times[-1] >= 0.8 * max(times), times
        assert times[-1] > 3 * times[0], times
        small, bandwidth_bound = sorted(times[:7]), sorted(times[-3:])
        assert bandwidth_bound[1] > small[3], times
        assert 0 < max(float(r["busbw_gbs"]) for r in got) < 200, got
    # each node's output and the command beside the results
    logs = sorted(p.name for p in (run / "comm" / "pp1-tp4-ep1" / "tp4").iterdir())
    assert logs == ["commands.txt", "node0.log", "node1.log", "node2.log", "node3.log"]
    assert "GLOO_SOCKET_IFNAME=lo" in (run / "comm" / "pp1-tp4-ep1" / "tp4" /
                                       "commands.txt").read_text()  # the server's env


@pytest.mark.parametrize(("fault", "message"), [
    ("wrong_sum:1", r"wrong sum: 127\.0\.42\.22 \(127\.0\.42\.22\) rank 1: 1 of 256 elements"),
    ("hang:1", r"hang \(bounded wait\): 127\.0\.42\.22 \(127\.0\.42\.22\) rank 1: no progress"
               r" for \d+ s \(limit 5 s\) while size 1024 B"),
    ("init:1", r"init failure: 127\.0\.42\.22 \(127\.0\.42\.22\) rank 1: .*"
               r"init_process_group\(gloo\) with 127\.0\.42\.21:42212"),
])
def test_real_comm_failure_names_node_and_rank(tmp_path: Path, torch_python: str, fault: str,
                                               message: str) -> None:
    sweep = load(_matrix(tmp_path, torch_python))
    cluster = sweep.cluster("cpu")
    cluster = replace(cluster, env={**cluster.env, "PPSWEEP_COMM_FAULT": fault})
    store = RunStore(tmp_path / "r", "run")
    spec = CommSpec(sizes=(1024, 4096), warmup_iters=1, iters=2, timeout_s=5)
    with pytest.raises(CommFailed, match=message) as info, Registry() as registry:
        run_comm(sweep, cluster, sweep.config("pp2-tp2-ep1"), store, registry, spec=spec)
    assert "pp2-tp2-ep1: all-reduce benchmark of tp2 (2 nodes; 127.0.42.21, 127.0.42.22" in str(
        info.value)
