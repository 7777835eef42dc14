"""The profile window on real SGLang 0.5.23 (CPU, gloo, 4 loopback nodes 127.0.43.11-14).

One boot of PP2/TP2 with a tiny workload and a ``[profile]`` table: the extra round is wrapped
by SGLang's real /start_profile and /stop_profile, every rank's torch-profiler trace comes back
into ``profile/<layout>/`` and the attribution finds gloo collectives on every rank.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from support.paths import ACCEPTANCE
from support.real import READINESS_WORKAROUND, Provisioned, outcomes, sweep_toml
from support.runs import rows, run_dir

pytestmark = pytest.mark.slow

HOSTS = '["127.0.43.11", "127.0.43.12", "127.0.43.13", "127.0.43.14"]'
PP2_TP2 = """
[[configs]]
pp = 2
tp = 2
"""
PROFILE = """
[profile]
activities = ["CPU"]
num_steps = 2
num_requests = 4
concurrency = 2
timeout_s = 120
"""


def test_real_profile_window_traces_every_rank(
    pytester: pytest.Pytester, sglang_cpu: Provisioned, tmp_path: Path, mark: str
) -> None:
    text = sweep_toml(sglang_cpu, port=42800, dist_port=42900, mark=mark, configs=PP2_TP2,
                      baseline="pp2", repeats=1, num_requests=4, concurrency=[2])
    text, n = re.subn(r"^hosts = \[.*\]$", f"hosts = {HOSTS}", text, count=1, flags=re.M)
    assert n == 1
    folder = pytester.path / "matrix"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(text + PROFILE)
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    (folder / "conftest.py").write_text(READINESS_WORKAROUND)
    reports, junit = tmp_path / "reports", tmp_path / "junit.xml"
    result = pytester.runpytest_subprocess(
        str(folder), "-v", "--ppsweep-reports", str(reports), f"--junitxml={junit}",
        "-p", "no:cacheprovider", timeout=600,
    )
    cid = "pp2-tp2-ep1"
    seen = outcomes(junit)
    assert seen.get(f"test_profile[{cid}]") == "passed", result.stdout.str()[-8000:]
    assert all(v in ("passed", "skipped") for v in seen.values()), seen
    run = run_dir(reports)

    # The real ProfileReq that was sent, and SGLang's own log lines about it.
    body = json.loads((run / "profile" / cid / "request.json").read_text())
    assert body["activities"] == ["CPU"] and body["num_steps"] == 2
    assert body["profile_prefix"] == cid and body["output_dir"] == str(run / "profile" / cid)
    log0 = (run / "service" / cid / "node0.log").read_text(errors="replace")
    assert "Profiling starts. Traces will be saved to:" in log0

    # One trace per rank (TP-t-PP-p), written by SGLang's profiler, each with gloo collectives.
    traces = sorted(p.name for p in (run / "profile" / cid).glob("*.trace.json.gz"))
    assert [re.search(r"TP-\d-PP-\d", t).group(0) for t in traces] == [  # type: ignore[union-attr]
        "TP-0-PP-0", "TP-0-PP-1", "TP-1-PP-0", "TP-1-PP-1"
    ]
    attribution = json.loads((run / "profile" / cid / "attribution.json").read_text())
    assert len(attribution["per_rank"]) == 4 and len(attribution["stable"]) == 4
    for rank in attribution["per_rank"]:
        assert rank["source"] == "cpu"
        assert rank["calls"].get("all_reduce", 0) > 0, rank  # the TP group's gloo all-reduce
        assert rank["calls"].get("send_recv", 0) > 0, rank  # the PP hand-off
        assert rank["cumulative_ms"]["all_reduce"] > 0 and rank["window_ms"] > 0

    # The profile round is kept out of the medians: results.csv holds the benchmark only.
    assert [(r["concurrency"], r["repeat"]) for r in rows(run / "results.csv")] == [("2", "1")]
    with (run / "profile.csv").open() as fh:
        table = {r["kind"]: r for r in csv.DictReader(fh) if r["config_id"] == cid}
    assert float(table["all_reduce"]["calls"]) > 0 and float(table["send_recv"]["calls"]) > 0
    assert "Where the time goes" in (run / "report.html").read_text()
