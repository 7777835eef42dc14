"""An axis sweep on real SGLang 0.5.23 (CPU, one loopback node 127.0.40.1, tiny random MoE):
TP1 × chunked_prefill_size 256 vs 512 on a short decode workload (512 prompt tokens, two chunks
at 256, then 16 output tokens). Two boots of one rank each, one run shared by the asserts:
topology, N/N, decode metrics and the confounding check against the real server. A layout across
nodes on real SGLang is booted by tests/real/test_real_sglang.py; this test is about the axis,
and a one-rank boot costs a third of a four-node one on 2 cores. Several workloads per sweep are
run on the emulator (tests/e2e/test_axes_e2e.py)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import ACCEPTANCE
from support.real import (
    READINESS_WORKAROUND,
    Provisioned,
    assert_none_left,
    sweep_toml,
)

pytestmark = pytest.mark.slow

AXES = """
[[configs]]
pp = 1
tp = 1

[axes]
chunked_prefill_size = [256, 512]
"""
CHUNK256, CHUNK512 = "pp1-tp1-ep1", "pp1-tp1-ep1-chunk512"


def _axis_toml(prov: Provisioned, mark: str) -> str:
    text = sweep_toml(prov, port=41200, dist_port=41300, mark=mark, configs=AXES,
                      num_requests=4, repeats=1, output_len=16, concurrency=[2],
                      baseline=CHUNK256)
    hosts = 'hosts = ["127.0.6.1", "127.0.6.2", "127.0.6.3", "127.0.6.4"]'
    assert hosts in text, text
    return text.replace(hosts, 'hosts = ["127.0.40.1"]')


@pytest.fixture(scope="module")
def real_axes(sglang_cpu: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[subprocess.CompletedProcess[str], Path]]:
    base = tmp_path_factory.mktemp("real-axes")
    mark = uuid.uuid4().hex[:12]
    folder = base / "matrix"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(_axis_toml(sglang_cpu, mark))
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    (folder / "conftest.py").write_text(READINESS_WORKAROUND)
    reports = base / "reports"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-v", "-p", "no:cacheprovider",
         "--ppsweep-reports", str(reports), "--ppsweep-spread-rule", "warn"],
        cwd=base, capture_output=True, text=True, timeout=540, check=False)
    runs = [p for p in reports.iterdir() if p.is_dir()] if reports.is_dir() else []
    try:
        assert len(runs) == 1, out.stdout[-4000:] + out.stderr[-2000:]
        yield out, runs[0]
    finally:
        assert_none_left(mark)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_axis_points_boot_with_their_topology_and_complete(
        real_axes: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    out, run = real_axes
    text = out.stdout
    errors = [line for line in text.splitlines() if "Error" in line or "Traceback" in line]
    assert out.returncode == 0, "\n".join(errors[:40]) + "\n" + text[-4000:]
    for cid in (CHUNK256, CHUNK512):
        assert f"test_topology[{cid}] PASSED" in text, text[-6000:]
        assert f"test_prefill[{cid}-c2] PASSED" in text, text[-6000:]
        assert f"test_valid[{cid}-c2] PASSED" in text, text[-6000:]
    for cid, chunk in ((CHUNK256, 256), (CHUNK512, 512)):
        info = json.loads((run / "metadata" / f"{cid}.server_info.json").read_text())
        assert (info["chunked_prefill_size"], info["version"]) == (chunk, "0.5.23")
        assert (info["pp_size"], info["tp_size"], info["ep_size"]) == (1, 1, 1)


def test_decode_workload_metrics(real_axes: tuple[subprocess.CompletedProcess[str],
                                                  Path]) -> None:
    _, run = real_axes
    for row in _rows(run / "results.csv"):
        assert row["completed"] == "4" and int(row["output_tokens"]) == 4 * 16, row
        assert float(row["e2e_p50_s"]) > float(row["ttft_p50_s"]) > 0, row
        if row.get("tpot_p50_s"):  # the decode metrics (measure/metrics.py) when present
            assert float(row["tpot_p50_s"]) > 0 and float(row["output_tps"]) > 0, row


def test_confounding_against_the_real_server(real_axes: tuple[subprocess.CompletedProcess[str],
                                                              Path]) -> None:
    out, run = real_axes
    comps = _rows(run / "comparisons.csv")
    axis = [r for r in comps if r["kind"] == "axis chunked_prefill_size"]
    assert [(r["reference"], r["config_id"]) for r in axis] == [(CHUNK256, CHUNK512)]
    assert axis[0]["confounded"] == "False"
    assert axis[0]["differs"] == "server.chunked_prefill_size: 256 → 512"
    assert axis[0]["input_tps_delta_pct"] != ""
    assert "CONFOUNDED" not in out.stdout
