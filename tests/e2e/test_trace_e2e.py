"""A Mooncake trace replayed as a sweep's workload on the emulator: every request of the trace
sent with its own output length on its own timestamps, the prefix hit rate its sharing implies
recorded per round with the emulator's "not measured" (it has no prefix cache: never a number),
and the answer naming the workload it holds for."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.paths import DATA
from support.runs import rows

SMALL = DATA / "mooncake" / "small.jsonl"
TRACE = {"input_len = 4096\noutput_len = 1\nconcurrency = [2, 4]\nnum_requests = 6\n":
         f'type = "trace"\npath = "{SMALL}"\ntime_scale = 0.5\nconcurrency = [4]\n'}


def test_a_trace_sweep_on_the_emulator(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder, reports = sweep_dir(edits=TRACE, net="127.0.58"), tmp_path / "reports"
    done = pytester.runpytest_subprocess(str(folder), "-v", "--ppsweep-reports", str(reports),
                                         "--ppsweep-run-id", "trace", timeout=600)
    out = done.stdout.str()
    assert done.ret == 0, out[-3000:]
    part = reports / "trace"
    got = rows(part / "results.csv")
    assert {r["config_id"] for r in got} == {"pp4-tp8-ep4", "pp8-tp4-ep4"}
    for r in got:
        assert r["num_requests"] == r["completed"] == "24", r
        assert r["output_tokens"] == r["output_tokens_nominal"] == "775", r  # each its own
        assert float(r["hit_rate_implied"]) == pytest.approx(0.6031, abs=1e-4)
        assert r["hit_rate_achieved"] == ""  # not measured, never invented
        assert r["hit_rate_source"] == "not measured: the emulator has no prefix cache"
    log = (part / "progress.log").read_text()
    assert "prefix hit rate not measured: the emulator has no prefix cache (implied 60.3%)" in log
    run_json = json.loads((part / "metadata" / "run.json").read_text())
    assert run_json["workload"]["type"] == "trace" and "trace_file" not in run_json["workload"]
    (layout,) = [a for a in json.loads((part / "answers.json").read_text())["answers"]
                 if a["kind"] == "layout"]
    holds = layout["holds_for"]
    assert holds.startswith(f"trace {SMALL} (sha256 ") and "24 requests" in holds, holds
    assert "replayed on its own timestamps × 0.5" in holds, holds
    # the terminal's Answers block says it too, wrapped to its width: a line may break anywhere
    # in the sentence, so the words are compared with the line breaks and indents taken out
    flat = " ".join(out.split())
    assert "Holds for trace" in flat and "sha256" in flat.split("Holds for trace", 1)[1][:400]
