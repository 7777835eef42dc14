"""The profile window end to end on the emulator (pytester, real rank processes on
127.0.43.1-4): test_profile per layout, the traces in profile/<layout>/, the §9.3 table in
profile.csv and the report; a node that writes no trace fails only its layout's profile test."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from support.matrices import small_matrix
from support.outcomes import outcomes
from support.paths import ACCEPTANCE, REPO
from support.runs import rows, run_dir

# PP1, and PP8 whose node 2 writes no trace (the emulator's fault). The shape of §9.3 (PP8 vs
# PP1 with deltas) is tests/sim/model/test_tracerec.py's and the README runner's (ppsweep.toml).
CONFIGS = """
[[configs]]
pp = 1
tp = 32

[[configs]]
pp = 8
tp = 4
env = { PPSWEEP_SIM_FAULTS = "profile_missing@node=2" }
"""
PROFILE = """
[profile]
concurrency = 4
timeout_s = 3
"""


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, Path]:
    """One run of the sweep with a [profile] table (module scope: two boots, shared)."""
    import subprocess
    import sys

    tmp = tmp_path_factory.mktemp("profile-e2e")
    port = 42500 + (os.getpid() % 40) * 2
    text = small_matrix(CONFIGS, net="127.0.43", port=port, dist=port + 100, scale=2000,
                        state=tmp / "sim-state")
    text = text.replace('spread_rule = "warn"', 'spread_rule = "warn"\nbaseline = "pp1"')
    text = text.replace("concurrency = [2, 4]", "concurrency = [4]")
    folder = tmp / "matrix"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(text + PROFILE)
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    reports = tmp / "reports"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-v", "-p", "no:cacheprovider",
         "--ppsweep-reports", str(reports), "--ppsweep-repeats", "1"],
        capture_output=True, text=True, timeout=600, cwd=tmp,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
            "PYTHONPATH", "")])},
    )
    result = pytest.RunResult(proc.returncode, proc.stdout.splitlines(),
                              proc.stderr.splitlines(), 0.0)
    return result, run_dir(reports)


def test_profile_test_per_layout_and_a_missing_trace_fails_only_its_layout(
    profiled: tuple[pytest.RunResult, Path],
) -> None:
    result, _run = profiled
    out = result.stdout.str()
    seen = outcomes(out)
    assert seen["test_profile[pp1-tp32-ep4]"] == "PASSED", out[-6000:]
    assert seen["test_profile[pp8-tp4-ep4]"] == "FAILED", out[-6000:]
    # the rest of PP8 is untouched: its benchmark, validity and log tests pass
    others = {k: v for k, v in seen.items() if not k.startswith("test_profile[")}
    assert others and all(v == "PASSED" for v in others.values()), others
    # the failure names the node (with its address) and the ranks it lacks
    # node 2 runs PP stages 4 and 5 of PP8 (TP 0-3 each)
    assert "node 2 (127.0.43.3): no trace of rank TP-0-PP-4, TP-1-PP-4" in out
    assert "TP-3-PP-5 in " in out and "node 1 " not in out
    assert "profile traces missing" in out


def test_traces_attribution_and_the_table(profiled: tuple[pytest.RunResult, Path]) -> None:
    _result, run = profiled
    cid = "pp1-tp32-ep4"
    folder = run / "profile" / cid
    assert len(list(folder.glob(f"{cid}-*-TP-*.trace.json.gz"))) == 32
    body = json.loads((folder / "request.json").read_text())
    assert set(body) >= {"output_dir", "activities", "profile_prefix", "num_steps"}
    assert body["profile_prefix"] == cid and body["num_steps"] == 3
    assert body["activities"] == ["CPU", "GPU"]
    assert len((folder / "requests.jsonl").read_text().splitlines()) == 6
    # kept out of the medians: results.csv has the benchmark rounds only (2 layouts × 1 C)
    assert len(rows(run / "results.csv")) == 2
    with (run / "profile.csv").open() as fh:
        table = {(r["config_id"], r["kind"]): r for r in csv.DictReader(fh)}
    assert set(table) == {(cid, "all_reduce")}  # PP1 has no send/recv; PP8's window failed
    row = table[(cid, "all_reduce")]
    assert float(row["calls"]) == 600 and float(row["overlap_ratio"]) < 0.01  # 3 steps × 200
    assert row["stable_ranks"] == "32" and row["baseline"] == cid
    html = (run / "report.html").read_text()
    assert "Where the time goes (§9.3)" in html and "Share of the profile window" in html
