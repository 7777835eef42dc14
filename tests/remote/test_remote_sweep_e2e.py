"""End-to-end sweeps (pytester, subprocess) on the four namespace hosts: the seeds' whole matrix
through Docker over SSH, a smaller one as processes over SSH with sudo, a failing preflight, and
Ctrl-C / SIGTERM / SIGKILL scenarios. After each, nothing may be left on any host (conftest)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.matrices import BOOT_FAULT_CONFIGS
from support.processes import wait_until
from support.remote import (
    IMAGE,
    SECRET_TOKEN,
    TestHosts,
    containers,
    leftovers,
    seed_matrix,
    small_matrix,
)

from pytest_ppsweep.cluster import reap
from pytest_ppsweep.matrix.parse import load

SEED_IDS = ("pp1-tp32-ep4", "pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2")


def run(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*[str(a) for a in args], timeout=600)


def assert_passed(result: pytest.RunResult, passed: int) -> None:
    """``passed`` tests passed and none failed (no test_no_regression without a reference)."""
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == passed, result.stdout.str()[-5000:]
    assert not outcomes.get("failed") and not outcomes.get("errors"), result.stdout.str()[-5000:]


def run_dir(reports: Path) -> Path:
    runs = [p for p in reports.iterdir() if p.is_dir()]
    assert len(runs) == 1, f"expected one run folder in {reports}, found {runs}"
    return runs[0]


def rows(path: Path) -> list[dict[str, str]]:
    import csv

    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def files_containing(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_seed_sweep_through_docker_over_ssh(
    pytester: pytest.Pytester,
    sweep_folder: Callable[..., Path],
    work: dict[str, Path],
    tmp_path: Path,
) -> None:
    folder = sweep_folder(seed_matrix("ns", work["model"], work["devices"]), launcher="docker")
    reports = tmp_path / "reports"
    t0 = time.monotonic()
    result = run(pytester, folder, "-v", "--ppsweep-image", IMAGE, "--ppsweep-reports", reports)
    took = time.monotonic() - t0
    assert_passed(result, 40)  # 5 layouts × 8 tests (test_outputs_match included)
    run_folder = run_dir(reports)
    results = rows(run_folder / "results.csv")
    assert len(results) == 5 * 2 * 3  # layouts × C × repeats
    assert {r["config_id"] for r in results} == set(SEED_IDS)
    assert all(r["completed"] == "40" and r["failed"] == "0" for r in results)
    configs = {r["config_id"]: r for r in rows(run_folder / "configs.csv")}
    assert all(
        configs[c]["boot_ok"] == "True" and configs[c]["topology_ok"] == "True" for c in SEED_IDS
    )
    for cid in SEED_IDS:
        service = run_folder / "service" / cid
        names = sorted(p.name for p in service.iterdir())
        assert names == ["launch.sh"] + [
            f"node{r}.{kind}" for r in range(4) for kind in ("docker-run.sh", "log")
        ]
        # each node's log streamed from its container, written by the emulator on that node
        for r in range(4):
            log = (service / f"node{r}.log").read_text()
            assert "SIMULATED SGLang" in log and f"'host': '10.200.0.10{r + 1}'" in log
        line = (service / "node0.docker-run.sh").read_text()
        assert f"--label ppsweep.run={run_folder.name}" in line and "--gpus all" in line
        assert f"--device {work['devices']}:/dev/infiniband:rwm" in line
        assert "--network host --ipc host --shm-size 1g" in line and "--init" in line
        assert sorted(p.stem for p in (run_folder / "gpu" / cid).iterdir()) == [
            "after",
            "before",
            "cleaned",
            "healthy",
        ]
    healthy = (run_folder / "gpu" / "pp8-tp4-ep4" / "healthy.csv").read_text().splitlines()
    assert {line.split(",")[0] for line in healthy[1:]} == {"h601", "h602", "h603", "h604"}
    nodes = json.loads((run_folder / "metadata" / "nodes-ns.json").read_text())
    assert [n["hostname"] for n in nodes["nodes"]] == ["h601", "h602", "h603", "h604"]
    assert all(n["image_id"].startswith("sha256:") for n in nodes["nodes"])
    # the secret of the cluster's env reached the containers, never a file of the run
    # Not even the copy of the sweep file keeps it: secret-looking values are redacted there.
    assert files_containing(run_folder, SECRET_TOKEN) == []
    assert SECRET_TOKEN not in result.stdout.str() + result.stderr.str()
    print(f"seed sweep through docker over ssh: {took:.1f} s")


def test_small_sweep_as_processes_over_ssh_with_sudo(
    pytester: pytest.Pytester,
    sweep_folder: Callable[..., Path],
    test_hosts: TestHosts,
    work: dict[str, Path],
    tmp_path: Path,
) -> None:
    folder = sweep_folder(
        small_matrix("ns", work["model"], work["devices"]),
        launcher="process",
        user=test_hosts.sudo_user,
        sudo=True,
    )
    reports = tmp_path / "reports"
    result = run(pytester, folder, "-v", "--ppsweep-reports", reports)
    assert_passed(result, 16)
    run_folder = run_dir(reports)
    assert len(rows(run_folder / "results.csv")) == 2 * 2 * 2
    log = (run_folder / "service" / "pp8-tp4-ep4" / "node3.log").read_text()
    assert "SIMULATED SGLang" in log and "'host': '10.200.0.104'" in log
    nodes = json.loads((run_folder / "metadata" / "nodes-ns.json").read_text())
    assert [n["hostname"] for n in nodes["nodes"]] == ["h601", "h602", "h603", "h604"]
    # the sudo password reached no file of the run, no output and no sshd log
    password = test_hosts.password
    assert files_containing(run_folder, password) == []
    assert files_containing(pytester.path, password) == []
    assert files_containing(test_hosts.root / "hosts", password) == []
    assert password not in result.stdout.str() + result.stderr.str()
    # Not even the copy of the sweep file keeps it: secret-looking values are redacted there.
    assert files_containing(run_folder, SECRET_TOKEN) == []


def test_failing_preflight_lists_every_problem_and_boots_nothing(
    pytester: pytest.Pytester,
    sweep_folder: Callable[..., Path],
    work: dict[str, Path],
    tmp_path: Path,
) -> None:
    missing = work["model"].parent / "no-model"
    folder = sweep_folder(small_matrix("ns", missing, work["devices"]), launcher="docker")
    reports = tmp_path / "reports"
    result = run(
        pytester, folder, "--ppsweep-image", "local/not-here:1", "--ppsweep-reports", reports
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert (
        "preflight of cluster 'ns' found 8 problem(s) on 4 of 4 node(s); nothing was started" in err
    )
    for name, address in (("h601", "10.200.0.101"), ("h604", "10.200.0.104")):
        assert f"{name} ({address}): image local/not-here:1 is not present" in err
        assert f"{name} ({address}): model path {missing} does not exist" in err
    # the error alone: no summary line, and no run folder (nothing was recorded, nothing booted)
    assert "no summary" not in result.stdout.str(), result.stdout.str()[-2000:]
    assert not reports.exists() or not any(reports.iterdir()), sorted(reports.rglob("*"))




def test_boot_failure_on_the_hosts_fails_fast_with_the_remote_logs(
    pytester: pytest.Pytester,
    sweep_folder: Callable[..., Path],
    work: dict[str, Path],
    tmp_path: Path,
) -> None:
    matrix = small_matrix("ns", work["model"], work["devices"], configs=BOOT_FAULT_CONFIGS)
    folder = sweep_folder(matrix, launcher="docker")
    reports = tmp_path / "reports"
    t0 = time.monotonic()
    result = run(pytester, folder, "-v", "--ppsweep-image", IMAGE, "--ppsweep-reports", reports)
    assert time.monotonic() - t0 < 120  # fail-fast, not the 60 s boot timeout per test
    text = result.stdout.str()
    assert "pp8-tp4-ep4: boot failed" in text and "CUDA out of memory" in text
    # the tail of the log streamed from the container of the rank that failed first (which
    # rank's OOM comes first is a race: any of the four)
    assert re.search(r"--- node\d\.log \(last \d+ lines\) ---", text), text[-4000:]
    assert text.count("test_topology[pp4-tp8-ep4] PASSED") == 1
    configs = {r["config_id"]: r for r in rows(run_dir(reports) / "configs.csv")}
    assert configs["pp8-tp4-ep4"]["boot_ok"] == "False"
    assert "CUDA out of memory" in configs["pp8-tp4-ep4"]["boot_error"]


def start_sweep(folder: Path, reports: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            str(folder),
            "--ppsweep-reports",
            str(reports),
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_for_a_round(proc: subprocess.Popen[bytes], reports: Path) -> str:
    """Wait until one round is on disk; returns the run id."""

    def done() -> bool:
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        return reports.exists() and any(rows(p / "results.csv") for p in reports.iterdir())

    wait_until(done, 180, "a finished round")
    return run_dir(reports).name


# Docker over SSH is interrupted by Ctrl-C and SIGTERM at seeded moments of a round and of a boot
# in tests/remote/test_interrupts_remote.py; the process launcher (ranks as processes over SSH,
# under sudo) is interrupted here.
@pytest.mark.parametrize(("launcher", "sig"), [("process", signal.SIGINT)])
def test_interrupt_mid_sweep_leaves_nothing_on_any_host(
    sweep_folder: Callable[..., Path],
    test_hosts: TestHosts,
    work: dict[str, Path],
    tmp_path: Path,
    launcher: str,
    sig: int,
) -> None:
    folder = sweep_folder(
        small_matrix("ns", work["model"], work["devices"]), launcher=launcher, scale=100
    )
    reports = tmp_path / "reports"
    proc = start_sweep(folder, reports, "--ppsweep-image", IMAGE)
    try:
        wait_for_a_round(proc, reports)
        assert leftovers(test_hosts), "no rank running mid-sweep"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0
    assert rows(run_dir(reports) / "results.csv"), "finished rounds were lost"
    # every container and process of the interrupted layout is gone from every host
    assert leftovers(test_hosts) == [], out.decode()[-3000:]


def test_killed_run_leaves_ranks_that_are_reported_and_reaped(
    pytester: pytest.Pytester,
    sweep_folder: Callable[..., Path],
    test_hosts: TestHosts,
    work: dict[str, Path],
    tmp_path: Path,
) -> None:
    folder = sweep_folder(
        small_matrix("ns", work["model"], work["devices"]), launcher="docker", scale=100
    )
    reports = tmp_path / "killed"
    proc = start_sweep(folder, reports, "--ppsweep-image", IMAGE)
    try:
        run_id = wait_for_a_round(proc, reports)
    finally:
        proc.kill()  # SIGKILL: no teardown runs
        proc.communicate()
    cluster = load(folder / "ppsweep.toml", image=IMAGE).cluster("ns")
    left = reap.find(cluster, run_id=run_id)
    assert sorted(x.host for x in left) == ["h601", "h602", "h603", "h604"]
    assert {x.config for x in left} == {"pp4-tp8-ep4"} and {x.run for x in left} == {run_id}
    assert sum(len(v) for v in containers(test_hosts).values()) == 4

    # the next session reports them, and its preflight refuses to boot onto busy nodes
    again = run(pytester, folder, "--ppsweep-image", IMAGE, "--ppsweep-reports", tmp_path / "r2")
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    out = again.stdout.str() + again.stderr.str()
    assert (
        "4 rank(s) of earlier runs are still on the nodes (remove them with --ppsweep-reap)" in out
    )
    assert f"container ppsweep-{run_id}-pp4-tp8-ep4-node0 of run {run_id}" in out
    assert "h601 (10.200.0.101): HTTP port 30000 is already in use" in out
    assert "h604 (10.200.0.104): GPUs are not idle: 8 compute process(es): pid" in out

    # --ppsweep-reap removes them first; the sweep then runs
    reaped = run(
        pytester,
        folder,
        "--ppsweep-image",
        IMAGE,
        "--ppsweep-reap",
        "--ppsweep-config",
        "pp4",
        "--ppsweep-repeats",
        "1",
        "--ppsweep-reports",
        tmp_path / "r3",
    )
    assert_passed(reaped, 8)
    assert "removed 4 leftover rank(s) of earlier runs" in reaped.stdout.str()
    assert reap.find(cluster) == []
