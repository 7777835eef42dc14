"""End-to-end sweeps on the real test Slurm (tests/support/slurm.py): the seeds' sweep cut to two
layouts on four Slurm nodes (one allocation, one step per layout), preflight through Slurm, and an
xdist pool of two Slurm clusters driven through the login node over SSH with the comm step and the
profile window (the faults are in test_slurm_faults.py). After each test there are 0
allocations, 0 steps and 0 tasks (slurm_clean)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.matrices import replace_once
from support.paths import sweep_folder
from support.remote import SECRET_TOKEN, make_device_dir, seed_matrix
from support.slurm import TestSlurm, allocations_granted, slurm_cluster_toml, two_layout_sweep

from pytest_ppsweep.cluster.slurm import check_pyxis
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.slurmsettings import with_slurm

TWO = "pp4-tp8-ep4,pp8-tp4-ep4"


def rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def run_dir(reports: Path) -> Path:
    runs = [p for p in reports.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture
def seed_folder(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    state = tmp_path / "simstate"
    state.mkdir()
    text = seed_matrix("slurm", model, make_device_dir(tmp_path / "dev"))
    # a short workload: the seeds' 40 requests of 16k tokens are not what is tested here
    for old, new in (("num_requests = 40", "num_requests = 6"),
                     ("concurrency = [8, 16]", "concurrency = [8]"), ("repeats = 3", "repeats = 2"),
                     ("boot_timeout_s = 1800", "boot_timeout_s = 90")):
        text = replace_once(text, old, new)
    return sweep_folder(tmp_path / "sweep", text + "\n" + slurm_cluster_toml("slurm", state))


def test_seed_sweep_on_four_slurm_nodes(
    pytester: pytest.Pytester, slurm_clean: TestSlurm, seed_folder: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    result = pytester.runpytest_subprocess(
        str(seed_folder), "-v", "--ppsweep-config", TWO, "--ppsweep-reports", str(reports),
        timeout=400,
    )
    out = result.stdout.str()
    outcomes = result.parseoutcomes()
    assert not outcomes.get("failed") and not outcomes.get("errors"), out[-6000:]
    assert outcomes.get("passed", 0) >= 10, out[-6000:]
    run = run_dir(reports)
    results = rows(run / "results.csv")
    assert {r["config_id"] for r in results} == set(TWO.split(","))
    # the nodes came from the allocation; node 0 hosted the rendezvous
    nodes = json.loads((run / "metadata" / "nodes-slurm.json").read_text())
    assert "s701" in json.dumps(nodes)
    logs = sorted(p.name for p in (run).rglob("node*.log"))
    assert logs.count("node0.log") == 2 and logs.count("node3.log") == 2, logs
    launch = next(run.rglob("launch.sh")).read_text()
    assert "--node-rank 3" in launch and "10.201.0.101:20000" in launch
    # GPU snapshots through nvidia-smi in a step on each node (the emulator's shim)
    for config in TWO.split(","):
        healthy = rows(run / "gpu" / config / "healthy.csv")
        assert len(healthy) == 32, f"{config}: {len(healthy)} GPUs in the healthy snapshot"
        assert {r["node"] for r in healthy} == {"s701", "s702", "s703", "s704"}
    # live status: the boot and rounds were reported as they happened
    progress = (run / "progress.log").read_text()
    assert "booting on 4 nodes of slurm" in progress and "round 1/2" in progress
    # no secret in anything the run wrote
    leaked = [p for p in run.rglob("*") if p.is_file() and SECRET_TOKEN.encode() in p.read_bytes()]
    assert not leaked, leaked

    # reuse and the gate on Slurm, at the cost of one allocation and no boot: the same layouts
    # taken over from the first run, gated against it
    again = pytester.runpytest_subprocess(
        str(seed_folder), "-v", "--ppsweep-config", TWO, "--ppsweep-reports", str(reports),
        "--ppsweep-reuse", run.name, "--ppsweep-compare", run.name, timeout=300,
    )
    out = again.stdout.str()
    assert not again.parseoutcomes().get("failed"), out[-6000:]
    assert "test_no_regression" in out and "PASSED" in out, out[-6000:]
    second = max((p for p in reports.iterdir() if p.is_dir() and p != run),
                 key=lambda p: p.stat().st_mtime)
    assert "booting" not in (second / "progress.log").read_text()  # nothing was booted


def test_preflight_through_slurm_names_every_node_and_starts_nothing(
    pytester: pytest.Pytester, slurm_clean: TestSlurm, seed_folder: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "r"
    # A selection that matches nothing asks Slurm for nothing: no allocation, no run folder.
    granted = allocations_granted()
    result = pytester.runpytest_subprocess(
        str(seed_folder), "-k", "nomatch", "--ppsweep-reports", str(reports), timeout=120)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret in (0, pytest.ExitCode.NO_TESTS_COLLECTED), out[-4000:]
    assert allocations_granted() == granted, "an empty selection allocated on the cluster"
    assert not reports.exists() or not any(reports.iterdir()), sorted(reports.rglob("*"))
    assert "no summary" not in out, out[-4000:]

    toml = seed_folder / "ppsweep.toml"
    text = toml.read_text()
    toml.write_text(replace_once(text, f'python = "{sys.executable}"',
                                 'python = "/nowhere/python3"'))
    result = pytester.runpytest_subprocess(
        str(seed_folder), "--ppsweep-config", TWO, "--ppsweep-reports", str(reports),
        timeout=300,
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-4000:]
    assert "nothing was started" in out, out[-4000:]
    for name, address in slurm_clean.nodes:
        assert f"{name} ({address}): /nowhere/python3 cannot run" in out, out[-4000:]
    assert "booting" not in out
    # a run that uses the cluster allocates (the count above can tell); refused by the
    # preflight, it leaves the error alone: no summary, no run folder
    assert allocations_granted() == granted + 1
    assert "no summary" not in out and not any(reports.iterdir()), out[-4000:]
    # slurm_clean: the allocation made for the run was released, no step is left

    # Pyxis: a container image asks srun for --container-image, which this Slurm lacks
    sweep = load(toml)
    problems = check_pyxis(with_slurm(sweep.clusters["slurm"], container_image="nvcr.io#x/y:1"))
    assert problems and "expected srun with Pyxis" in problems[0], problems


COMM_PROFILE = """
[comm]
max_size = "256K"
warmup_iters = 1
iters = 2
timeout_s = 30

[profile]
concurrency = 4
timeout_s = 10
output_dir = "{on_nodes}"
"""


def login_folder(tmp_path: Path, cluster: TestSlurm, names: tuple[str, ...],
                 tables: str = "") -> Path:
    """The two-layout sweep on 2-node Slurm clusters ``names`` whose Slurm commands run on the
    login node over SSH."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    text = two_layout_sweep("slurmlogin", model, names[0], input_len=1024, requests=4,
                            repeats=1) + tables
    for name in names:
        state = tmp_path / f"simstate-{name}"
        state.mkdir()
        text += slurm_cluster_toml(name, state, nodes=2, extra=cluster.login_toml())
    return sweep_folder(tmp_path / "sweep", text)


def run_without_slurm_conf(folder: Path, reports: Path, *args: str) -> str:
    """pytest on ``folder`` with this host's SLURM_CONF hidden: only the login node is a Slurm
    client for it; its output, after asserting it passed."""
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-v", "-p", "no:cacheprovider",
         "--ppsweep-reports", str(reports), *args],
        capture_output=True, text=True, timeout=300, cwd=folder, env=env,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out


def test_two_slurm_clusters_over_the_login_node_with_comm_step_and_profile_window(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    """One run, the xdist pool of two Slurm clusters of 2 nodes each (two allocations of the one
    partition, disjoint nodes; one worker each), every Slurm command on the login node over SSH
    (this host's SLURM_CONF hidden), each layout with the comm step on its TP domains (one-node
    steps) and the profile window (each rank's trace written on its node, read back through a
    step)."""
    on_nodes = tmp_path / "on-the-nodes"
    folder = login_folder(tmp_path, slurm_clean, ("a", "b"), COMM_PROFILE.format(
        on_nodes=on_nodes))
    reports = tmp_path / "reports"
    out = run_without_slurm_conf(folder, reports, "--ppsweep-cluster", "a,b", "-n", "2")
    run = run_dir(reports)
    layouts = {"pp2-tp8-ep4", "pp4-tp4-ep4"}
    assert {r["config_id"] for r in rows(run / "results.csv")} == layouts, out[-6000:]
    # each layout ran on its own cluster's nodes: the two allocations shared no node
    used = {cid: {r["node"] for r in rows(run / "gpu" / cid / "healthy.csv")} for cid in layouts}
    assert all(len(nodes) == 2 for nodes in used.values()), used
    assert not used["pp2-tp8-ep4"] & used["pp4-tp4-ep4"], used
    # the comm step: every size of every layout once
    comm = rows(run / "comm.csv")
    assert {r["config_id"] for r in comm} == layouts, out[-6000:]
    for cid in layouts:
        sizes = [r["size_bytes"] for r in comm if r["config_id"] == cid]
        assert sizes and len(set(sizes)) == len(sizes), (cid, sizes)
    # the profile window: written on the nodes (not into the run folder), then read back
    for cid in layouts:
        body = json.loads((run / "profile" / cid / "request.json").read_text())
        assert body["output_dir"] == f"{on_nodes}/{run.name}/{cid}"
        traces = sorted((run / "profile" / cid).glob("*.trace.json.gz"))
        assert len(traces) == 16, (cid, traces)
    leaked = [p for p in run.rglob("*") if p.is_file() and SECRET_TOKEN.encode() in p.read_bytes()]
    assert not leaked, leaked
