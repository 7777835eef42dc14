"""A run folder of format 2 (written before run.json named the engine) stays a baseline: a new
emulator run, of today's format, is gated against the stored tests/data/runfolders/sim-format2
and passes: every point compared, the outputs compared with the old run's, the same engine
version read from both.

``PPSWEEP_CAPTURE_FORMAT=<dir>`` copies the new run folder there, pruned as the stored folders
are (no raw request lines, rank logs or GPU snapshots): how tests/data/runfolders/sim-format3
was made.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from support.outcomes import outcomes
from support.paths import REPO

from pytest_ppsweep.folder.runfolder import FORMAT_VERSION, RunFolder, RunKey, engine_facts

STORED = REPO / "tests" / "data" / "runfolders" / "sim-format2"
PRUNED = ("raw", "service", "gpu", "report.html", "benchmark.json", "progress.log")


def test_a_new_run_gates_against_a_stored_format_2_baseline(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    shutil.copytree(STORED, reports / "e2e-v2")
    assert RunFolder(reports / "e2e-v2").format_version() == 2
    # the sweep the stored folder was made by (two layouts, C 2 and 4), on nodes of its own
    folder = sweep_dir(net="127.0.71")
    # Wide speed thresholds: the two runs are on different machines and loads (a busy machine
    # emulates 3× slower at this time scale); what this test asks is that the old folder reads
    # as a baseline, every point compared, not that the speed held.
    result = pytester.runpytest_subprocess(
        str(folder), "-v", "--ppsweep-reports", str(reports), "--ppsweep-run-id", "e2e-v3",
        "--ppsweep-compare", "e2e-v2", "--ppsweep-threshold", "input_tps:-95%",
        "--ppsweep-threshold", "ttft_p50:+2000%", timeout=600)
    assert result.ret == 0, result.stdout.str()[-4000:] + result.stderr.str()[-2000:]
    seen = outcomes(result.stdout.str())
    gated = sorted(t for t in seen if t.startswith("test_no_regression["))
    assert gated == [f"test_no_regression[{cid}-c{c}]" for cid in ("pp4-tp8-ep4", "pp8-tp4-ep4")
                     for c in (2, 4)], seen
    assert all(seen[t] == "PASSED" for t in gated)
    result.stdout.fnmatch_lines(["*ppsweep gate vs *e2e-v2*", "*pp8-tp4-ep4*4*input_tps*"])
    assert seen["test_outputs_match[pp4-tp8-ep4]"] == seen["test_outputs_match[pp8-tp4-ep4]"] == (
        "PASSED")
    new = reports / "e2e-v3"
    meta = json.loads((new / "metadata" / "run.json").read_text())
    assert meta["format_version"] == FORMAT_VERSION == 3 and "sglang_version" not in meta
    old = RunFolder(reports / "e2e-v2").read_run_json()
    assert engine_facts(meta) == engine_facts(old) == ("sglang", "0.5.23")
    assert meta[RunKey.ENGINE] == "sglang"
    capture = os.environ.get("PPSWEEP_CAPTURE_FORMAT")
    if capture:
        target = Path(capture)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(new, target, ignore=shutil.ignore_patterns(*PRUNED, "*.log", "*.jsonl"))
