"""Issue 25 point 4 on the emulator: a prefill and a decode workload of one layout run on one
boot, also in the xdist pool (one "healthy after", one teardown, both workloads' rounds
recorded with the boot they ran on); a resume whose prefill finished boots once for the
decode alone, and a resume of a run whose every workload finished boots nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.outcomes import outcomes
from support.runs import rows

# The small sweep with two named workloads ([workload] holds their common keys).
TWO_WORKLOADS = {"vocab_size = 1000\n": """vocab_size = 1000

[workloads.prefill]
concurrency = [2]

[workloads.decode]
input_len = 512
output_len = 8
concurrency = [2]
"""}
PREFILL, DECODE = "pp8-tp4-ep4-prefill", "pp8-tp4-ep4-decode"


def run(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*[str(a) for a in args], timeout=600)


def test_two_workloads_one_boot_and_resume(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder, reports = sweep_dir(edits=TWO_WORKLOADS, net="127.0.57"), tmp_path / "reports"
    # under the xdist pool (one worker per cluster): the server configuration is one work unit
    whole = run(pytester, folder, "-v", "--ppsweep-config", "pp8", "--ppsweep-reports", reports,
                "--ppsweep-run-id", "whole", "-n", "1")
    out = whole.stdout.str()
    assert whole.ret == 0, out[-3000:]
    part = reports / "whole"
    log = (part / "progress.log").read_text()
    assert log.count("healthy after") == 1, log
    assert log.count(": booting on") == 1 and f"{PREFILL}: booting on" in log, log
    assert f"{DECODE}: runs on the boot of {PREFILL}" in log, log
    assert log.count("teardown") == 1, log  # one boot, torn down once, after the decode
    assert log.index(f"{DECODE} C=2: round 1/2 started") < log.index("teardown")
    got = rows(part / "results.csv")
    assert sorted({r["config_id"] for r in got}) == [DECODE, PREFILL]
    assert all(r["completed"] == r["num_requests"] for r in got)
    configs = {r["config_id"]: r for r in rows(part / "configs.csv")}
    assert configs[PREFILL]["boot_of"] == configs[DECODE]["boot_of"] == PREFILL
    assert configs[PREFILL]["boot_s"] and not configs[DECODE]["boot_s"]  # boot time counted once
    assert configs[DECODE]["log_clean"] == "True" and configs[DECODE]["topology_ok"] == "True"
    assert (part / "metadata" / f"{DECODE}.manifest.json").is_file()
    phases = json.loads((part / "metadata" / "phases.json").read_text())
    assert phases[PREFILL]["boot"] > 0 and phases[PREFILL]["teardown"] > 0
    assert phases[DECODE]["round"] > 0 and "boot" not in phases[DECODE]  # counted once
    assert "teardown" not in phases[DECODE]

    # A resume of a run whose every workload finished boots nothing.
    again = run(pytester, folder, "-v", "--ppsweep-config", "pp8", "--ppsweep-reports", reports,
                "--ppsweep-resume", part)
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert (part / "progress.log").read_text().count("healthy after") == 1

    # The prefill finished, the decode did not (it was not selected): the resume boots once,
    # for the decode alone, and the prefill's tests are skipped as done.
    first = run(pytester, folder, "-v", "--ppsweep-config", "pp8", "--ppsweep-reports", reports,
                "--ppsweep-run-id", "half", "-k", "not decode")
    assert first.ret == 0, first.stdout.str()[-3000:]
    half = reports / "half"
    assert {r["config_id"] for r in rows(half / "results.csv")} == {PREFILL}
    resumed = run(pytester, folder, "-v", "--ppsweep-config", "pp8", "--ppsweep-reports",
                  reports, "--ppsweep-resume", half)
    seen = outcomes(resumed.stdout.str())
    assert resumed.ret == 0, resumed.stdout.str()[-3000:]
    assert seen[f"test_topology[{PREFILL}]"] == "REUSED"
    assert seen[f"test_topology[{DECODE}]"] == "PASSED"
    log = (half / "progress.log").read_text()
    assert log.count("healthy after") == 2, log  # the prefill's run, then the decode's
    assert log.count(f"{DECODE}: booting on") == 1, log
    got = rows(half / "results.csv")
    assert sorted((r["config_id"], r["repeat"]) for r in got) == [
        (DECODE, "1"), (DECODE, "2"), (PREFILL, "1"), (PREFILL, "2")]
