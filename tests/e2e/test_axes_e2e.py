"""One end-to-end axis sweep on the emulator (real rank processes on 127.0.40.x): two layouts ×
moe_a2a_backend none/deepep × a prefill and a decode workload (PP8's decode excluded). Ids,
labels, SGLang's EP rewrite checked by test_topology, the confounded marks, memory per variant
and the report's axis tables, from one run shared by the asserts below."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from support.matrices import emulated_cluster
from support.paths import ACCEPTANCE

SWEEP = """
[sweep]
name = "axes-e2e"
model_path = "/data/hf_models/Kimi-K3"
ep_cap = 4
boot_timeout_s = 60
spread_rule = "warn"

[server]
moe_runner_backend = "flashinfer_mxfp4"
moe_a2a_backend = "none"
chunked_prefill_size = 8192
# below the seeds' 0.88, where DeepEP's buffers (EP rewritten to 8) fit PP4's worst rank too, so
# test_topology runs on the rewritten variant; at 0.88 it fails at boot (test_matrix/a2a.toml)
mem_fraction_static = 0.85

[[configs]]
pp = 4
tp = 8

[[configs]]
pp = 8
tp = 4

[axes]
moe_a2a_backend = ["none", "deepep"]

[[exclude]]
pp = 8
workload = "decode"

[workload]
num_requests = 4
repeats = 1
vocab_size = 1000

[workloads.prefill]
input_len = 2048
output_len = 1
concurrency = [2]

[workloads.decode]
input_len = 64
output_len = 8
concurrency = [1, 2]
"""


@pytest.fixture(scope="module")
def axis_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str],
                                                                Path]:
    base = tmp_path_factory.mktemp("axes-e2e")
    folder = base / "matrix"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(
        SWEEP + emulated_cluster("local", "127.0.40", 41010, 41310, 2000, base / "state"))
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    reports = base / "reports"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-v", "-p", "no:cacheprovider",
         "--ppsweep-reports", str(reports)],
        cwd=base, capture_output=True, text=True, timeout=300, check=False)
    runs = [p for p in reports.iterdir() if p.is_dir() and p.name.startswith("axes-e2e")]
    assert len(runs) == 1, out.stdout[-3000:] + out.stderr[-3000:]
    return out, runs[0]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_ids_workloads_and_the_ep_rewrite_pass(axis_run: tuple[subprocess.CompletedProcess[str],
                                                               Path]) -> None:
    out, _ = axis_run
    text = out.stdout
    assert out.returncode == 0, text[-4000:]
    for item in ("test_topology[pp4-tp8-ep8-a2a_deepep-decode] PASSED",
                 "test_topology[pp4-tp8-ep8-a2a_deepep-prefill] PASSED",
                 "test_prefill[pp4-tp8-ep4-decode-c1] PASSED",
                 "test_prefill[pp8-tp4-ep4-a2a_deepep-prefill-c2] PASSED"):
        assert item in text, item
    assert "pp8-tp4-ep4-decode" not in text  # excluded
    assert "prefill-c1]" not in text  # C=1 belongs to the decode workload only


def test_comparisons_summary_and_memory(axis_run: tuple[subprocess.CompletedProcess[str],
                                                        Path]) -> None:
    out, run = axis_run
    comps = _rows(run / "comparisons.csv")
    axis = {(r["config_id"], r["concurrency"]): r for r in comps
            if r["kind"] == "axis moe_a2a_backend"}
    deep4 = axis[("pp4-tp8-ep8-a2a_deepep-decode", "1")]
    assert deep4["reference"] == "pp4-tp8-ep4-decode"
    assert deep4["confounded"] == "True" and deep4["extra"] == "layout.ep"
    deep8 = axis[("pp8-tp4-ep4-a2a_deepep-prefill", "2")]
    assert deep8["confounded"] == "False"
    assert deep8["differs"] == "server.moe_a2a_backend: none → deepep"
    # a layout delta never crosses workloads: the decode points' baseline is PP4's decode
    base = [r for r in comps if r["kind"] == "baseline" and r["workload"] == "decode"]
    assert all(r["reference"].endswith("-decode") for r in base)
    summary = _rows(run / "summary.csv")
    assert {"vs_base_differs", "step_differs", "step_confounded"} <= set(summary[0])
    by = {(r["config_id"], r["concurrency"]): r for r in summary}
    # the tables' deltas stay within a workload: PP4's decode is its own workload's baseline
    assert by[("pp4-tp8-ep4-decode", "2")]["step_from"] == ""
    assert by[("pp4-tp8-ep4-decode", "2")]["tps_vs_base_pct"] == ""
    assert by[("pp8-tp4-ep4-prefill", "2")]["step_from"] == "pp4-tp8-ep4-prefill"
    configs = {r["config_id"]: r for r in _rows(run / "configs.csv")}
    assert len(configs) == 6 and all(int(r["mem_headroom_mib"]) > 0 for r in configs.values())
    assert "CONFOUNDED pp4-tp8-ep4-decode → pp4-tp8-ep8-a2a_deepep-decode" in out.stdout


def test_report_shows_the_axis_sweep(axis_run: tuple[subprocess.CompletedProcess[str],
                                                     Path]) -> None:
    _, run = axis_run
    html = (run / "report.html").read_text()
    assert "Axis sweep" in html
    assert "by moe_a2a_backend — workload decode" in html
    assert "moe_a2a_backend = deepep" in html and "headroom" in html
    assert "CONFOUNDED</span>: also layout.ep" in html
    # the axis tables come before the medians table (first screen)
    assert html.index("Axis sweep") < html.index("Medians over repeats")
