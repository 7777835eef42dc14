"""The adaptive sweep end to end on the emulator's real processes (loopback 127.0.44.x, ports
43000-43499): the seeds' five layouts with a cut-down workload; the planner boots only some,
says why for each, skips the rest as "predicted, not measured" (report, plan.csv, tests
skipped with the reason), and the run it leaves is what ``fit`` and ``plan`` read."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.matrices import emulated_cluster
from support.paths import ACCEPTANCE, REPO
from support.processes import sim_processes

from pytest_ppsweep.report.cli import main

FIVE = """
[[configs]]
pp = 1
tp = 32

[[configs]]
pp = 2
tp = 16

[[configs]]
pp = 4
tp = 8

[[configs]]
pp = 8
tp = 4

[[configs]]
pp = 16
tp = 2
server = { disable_decode_cuda_graph = true }
"""

HEAD = """
[sweep]
name = "adaptive"
model_path = "/data/hf_models/Kimi-K3"
ep_cap = 4
boot_timeout_s = 60
spread_rule = "warn"
spread_threshold = 0.05

[server]
moe_runner_backend = "flashinfer_mxfp4"
moe_a2a_backend = "none"
chunked_prefill_size = 8192
disable_radix_cache = true
mem_fraction_static = 0.88
"""

WORKLOAD = """
[workload]
input_len = 16384
output_len = 1
concurrency = [4, 8]
num_requests = 16
repeats = 3
vocab_size = 1000
"""

PORT = 43000 + (os.getpid() % 50) * 4
# 16 requests a round at time scale 100: a round's median moves by a few percent when the
# machine is loaded (a suite's other half beside it), not by the tens of percent that made the
# fit a misfit (which, rightly, boots every layout) at 8 requests and time scale 150.
SCALE = 100


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


Ran = tuple[subprocess.CompletedProcess[str], Path]


@pytest.fixture(scope="module")
def adaptive_run(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    base = tmp_path_factory.mktemp("adaptive")
    folder = base / "sweep"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(
        HEAD + FIVE + WORKLOAD
        + emulated_cluster("local", "127.0.44", PORT, PORT + 250, SCALE, base / "sim-state"))
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    reports = base / "reports"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", str(folder), "-p", "no:cacheprovider", "-rs",
             "--ppsweep-adaptive", "--ppsweep-reports", str(reports), "--ppsweep-run-id",
             "adaptive-run", "-p", "no:xdist"],
            cwd=base, env=_env(), capture_output=True, text=True, timeout=400, check=False)
    finally:
        left = sim_processes(f"--port {PORT}")
        for pid in left:
            os.kill(pid, 9)
    assert not left, f"emulator ranks left running: {sorted(left)}"
    return proc, reports / "adaptive-run"


def test_adaptive_boots_only_what_it_must_and_says_why(
        adaptive_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, run = adaptive_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    state = json.loads((run / "planner" / "adaptive.json").read_text())
    booted, skipped = state["booted"], state["skipped"]
    said = "\n".join(line for line in out.splitlines() if "adaptive" in line or "misfit" in line)
    assert 1 <= len(booted) < 5, f"booted {booted}; the planner said:\n{said[-4000:]}"
    assert set(booted) | set(skipped) == {
        "pp1-tp32-ep4", "pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2"}
    assert state["decided"] in booted
    for cid in booted:
        assert f"adaptive: boot {cid}: predicted Input TPS" in out
    for cid in skipped:
        assert f"adaptive: skip {cid} (predicted, not measured)" in out
        assert f"{cid}: predicted, not measured: " in out  # each skipped test says why
    configs = {r["config_id"] for r in csv.DictReader((run / "configs.csv").open())}
    assert configs == set(booted)  # the skipped layouts were never booted
    meta = json.loads((run / "metadata" / "run.json").read_text())
    assert set(meta["selected"]) == set(booted)  # skipped layouts are not judged INVALID


def test_skipped_layouts_are_predicted_not_measured_in_the_report(
        adaptive_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, run = adaptive_run
    rows = {r["layout"] + "-c" + r["concurrency"]: r
            for r in csv.DictReader((run / "planner" / "plan.csv").open())}
    state = json.loads((run / "planner" / "adaptive.json").read_text())
    for cid in state["skipped"]:
        assert rows[f"{cid}-c8"]["state"].startswith(("predicted, not measured", "unidentified"))
        assert rows[f"{cid}-c8"]["measured_input_tps"] == ""
    for cid in state["booted"]:
        row = rows[f"{cid}-c8"]
        assert row["state"] == "measured" and float(row["measured_input_tps"]) > 0
        assert float(row["input_tps_lo90"]) < float(row["input_tps_pred"]) < float(
            row["input_tps_hi90"])
    html = (run / "report.html").read_text()
    assert "Planner: predicted vs measured" in html and "predicted, not measured" in html
    assert "planner: predicted vs measured (90 % intervals)" in proc.stdout


def test_fit_and_plan_read_the_emulator_run(
        adaptive_run: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _proc, run = adaptive_run
    assert main(["fit", str(run)]) == 0
    out = capsys.readouterr().out
    assert "not identified by these data" in out  # few layouts: named, not hidden
    profile = json.loads((run / "planner" / "profile.json").read_text())
    assert all(len(p["ci90"]) == 2 for p in profile["parameters"])
    assert main(["plan", "--profile", str(run), "--workload", "c=1", "--workload",
                 "c=8,input=32768", "--csv", str(tmp_path / "plan.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert {(r["concurrency"], r["input_len"]) for r in rows} == {("1", "16384"), ("8", "32768")}
    assert {r["pp"] for r in rows} == {"1", "2", "4", "8", "16", "32"}
