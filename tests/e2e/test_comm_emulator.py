"""test_comm on the emulator: the seeds' sweep reproduces the §9.2 all-reduce table from the
profile's bus bandwidths, alone (no service booted) and after a layout's benchmark with its
service stopped; an injected comm failure names node and rank.

Addresses 127.0.42.1-4, ports 42100/42110 (this suite's comm range)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.matrices import replace_all, seed_text
from support.paths import ACCEPTANCE, REPO

from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.comm.runner import CommFailed, run_comm
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.commspec import CommSpec
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.planner.data import load_measured
from pytest_ppsweep.planner.fitting import comm_priors
from pytest_ppsweep.planner.roundcost import PARAMS, Hardware
from pytest_ppsweep.report.commview import COMM_TITLE

# seeds §9.2: NCCL 2.28.9 all_reduce_perf on 601-604, 128 MiB
# (latency ms, busbw GB/s, mean busbw over 128/256 MiB, topology)
SEED_92 = {"pp8-tp4-ep4": (4.93, 40.85, 41.00, "same node, same PCIe/NUMA island"),
           "pp4-tp8-ep4": (6.00, 39.13, 38.89, "same node, across 2 NUMA islands"),
           "pp2-tp16-ep4": (6.24, 40.31, 40.60, "2 nodes"),
           "pp1-tp32-ep4": (6.59, 39.47, 40.08, "4 nodes")}


def _matrix(tmp_path: Path) -> Path:
    text = seed_text()
    for old, new in (("127.0.6.", "127.0.42."), ("127.0.7.", "127.0.42.1"),
                     ("port = 30000", "port = 42100"), ("dist_init_port = 20000",
                                                         "dist_init_port = 42110")):
        text = replace_all(text, old, new)
    path = tmp_path / "ppsweep.toml"
    path.write_text(text)
    return path


def _pytest(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    reports = tmp_path / "reports"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(ACCEPTANCE), "--ppsweep-matrix",
         str(_matrix(tmp_path)), "--ppsweep-reports", str(reports), "-p", "no:cacheprovider",
         "-q", *args],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "PPSWEEP_SIM_STATE_DIR": str(tmp_path / "st")},
    )
    runs = sorted(reports.iterdir()) if reports.is_dir() else []
    assert runs, proc.stdout + proc.stderr
    return proc, runs[-1]


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_comm_alone_reproduces_the_seeds_table(tmp_path: Path) -> None:
    proc, run = _pytest(tmp_path, "--ppsweep-comm", "-k", "test_comm")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5 passed" in proc.stdout
    assert not (run / "service").exists() or not any((run / "service").iterdir())  # no boot
    summary = {r["config_id"]: r for r in _csv(run / "comm_summary.csv")}
    for cid, (latency_ms, busbw, mean, label) in SEED_92.items():
        row = summary[cid]
        assert float(row["latency_128m_ms"]) == pytest.approx(latency_ms, rel=0.05), cid
        assert float(row["busbw_128m_gbs"]) == pytest.approx(busbw, rel=0.05), cid
        assert float(row["busbw_mean_128m_256m_gbs"]) == pytest.approx(mean, rel=0.05), cid
        assert 38.5 <= float(row["busbw_128m_gbs"]) <= 41.5, cid  # "about 39-41 GB/s"
        assert row["label"] == label
    rows = [r for r in _csv(run / "comm.csv") if r["config_id"] == "pp1-tp32-ep4"]
    assert [int(r["size_bytes"]) for r in rows] == [1024 << i for i in range(19)]
    for r in rows[10:]:  # busbw = algbw × 2(n-1)/n (from 1 MiB on: 4 decimals are printed)
        assert float(r["busbw_gbs"]) == pytest.approx(float(r["algbw_gbs"]) * 62 / 32, rel=1e-3)
    page = (run / "report.html").read_text()
    assert COMM_TITLE in page and page.count("<polyline") == 5
    assert COMM_TITLE in proc.stdout  # the terminal summary carries the table too


def test_comm_after_the_benchmark_stops_the_service_first(tmp_path: Path) -> None:
    proc, run = _pytest(tmp_path, "--ppsweep-comm", "--ppsweep-config", "pp8",
                        "--ppsweep-repeats", "1", "--ppsweep-requests", "8",
                        "-o", "ppsweep_time_scale=2000", "-vv")
    out = proc.stdout + proc.stderr
    assert "test_comm[pp8-tp4-ep4] PASSED" in out, out
    assert "test_prefill[pp8-tp4-ep4-c8] PASSED" in out, out
    log = (run / "progress.log").read_text()
    stopped = log.index("pp8-tp4-ep4: service stopped for the all-reduce benchmark")
    assert log.index("round 1/1 started") < stopped < log.index("all-reduce benchmark on local")
    configs = {r["config_id"]: r for r in _csv(run / "configs.csv")}
    assert configs["pp8-tp4-ep4"]["log_clean"] == "True"  # the teardown's records were made
    summary = _csv(run / "comm_summary.csv")
    assert [r["config_id"] for r in summary] == ["pp8-tp4-ep4"]
    # the planner's fit reads the run's comm.csv: the TP4 span's bus bandwidth becomes a
    # measured prior (the emulator's profile: 40.85 GB/s within one PCIe island)
    measured = load_measured([run])
    assert {c.tp for c in measured.comm} == {4} and len(measured.comm) == 19
    priors = {p.name: p for p in comm_priors(PARAMS, measured.comm, Hardware())}
    assert priors["busbw_island_gbs"].prior == pytest.approx(40.85, rel=0.01)
    assert "comm.csv" in priors["busbw_island_gbs"].measured
    assert not priors["busbw_multinode_gbs"].measured  # no domain spans nodes


@pytest.mark.parametrize(("fault", "message"), [
    ("wrong_sum:9", r"wrong sum: 127\.0\.42\.2 \(127\.0\.42\.2\) rank 9: 1 element differs"),
    ("hang:0", r"hang \(bounded wait\): 127\.0\.42\.1 \(127\.0\.42\.1\) rank 0: no progress"),
    ("init:3", r"init failure: 127\.0\.42\.1 \(127\.0\.42\.1\) rank 3: init_process_group"),
])
def test_emulated_comm_failure_names_node_and_rank(tmp_path: Path, fault: str, message: str
                                                   ) -> None:
    sweep = load(_matrix(tmp_path))
    cluster = sweep.cluster("local")
    cluster = replace(cluster, env={**cluster.env, "PPSWEEP_COMM_FAULT": fault})
    config = sweep.config("pp2-tp16-ep4")  # 2 nodes × 8 GPUs: ranks 0-7 on node 0
    store = RunStore(tmp_path / "r", "run")
    with pytest.raises(CommFailed, match=message) as info, Registry() as registry:
        run_comm(sweep, cluster, config, store, registry, spec=CommSpec(sizes=(1024, 4096)))
    text = str(info.value)
    assert "pp2-tp16-ep4: all-reduce benchmark of tp16 (2 nodes" in text
    assert "other rank(s) (" in text and "stopped after the failure above" in text
