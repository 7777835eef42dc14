"""The correctness probe end to end on the emulator: every layout's greedy outputs in
outputs/<layout>.json, a layout whose PP stage is corrupted fails test_outputs_match alone
(naming prompt and position) and is excluded from the answers with the reason, and a sweep file
can turn the probe off."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.matrices import CONFIGS
from support.outcomes import outcomes
from support.runs import run_dir

# PP8 carries the fault in its own env: stage 1 of its pipeline computes a wrong output.
CORRUPT_PP8 = CONFIGS + 'env = { PPSWEEP_SIM_FAULTS = "corrupt_stage=1" }\n'


def run(pytester: pytest.Pytester, folder: Path, reports: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(str(folder), "-v", "--ppsweep-reports", str(reports),
                                         *args, timeout=600)


def test_a_corrupted_stage_fails_its_layout_alone(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    result = run(pytester, sweep_dir(CORRUPT_PP8), reports)
    text = result.stdout.str()
    seen = outcomes(text)
    assert seen["test_outputs_match[pp4-tp8-ep4]"] == "PASSED", text[-3000:]
    assert seen["test_outputs_match[pp8-tp4-ep4]"] == "FAILED", text[-3000:]
    failed = sorted(t for t, o in seen.items() if o != "PASSED")
    assert failed == ["test_outputs_match[pp8-tp4-ep4]"], failed  # on correctness alone
    result.stdout.fnmatch_lines([
        "*pp8-tp4-ep4: prompt 0 'The capital of France is': first differing position 0: "
        "token * (logprob -*) vs token * (logprob -*) in pp4-tp8-ep4 (this run's reference "
        "layout)*not a near-tie*",
    ])
    folder = run_dir(reports)
    # PP8 computes something else: no answer recommends it, each says why (as after a
    # failed boot), and its every point is INVALID with the reason
    answers = json.loads((folder / "answers.json").read_text())["answers"]
    layout = next(a for a in answers if a["kind"] == "layout")
    assert layout["answer"] != "pp8-tp4-ep4" and "pp8-tp4-ep4" not in layout["ranking"]
    (why,) = [e["why"] for e in layout["excluded"] if e["point"] == "pp8-tp4-ep4"]
    assert why.startswith("wrong outputs (vs pp4-tp8-ep4, this run's reference layout): "
                          "prompt 0 "), why
    assert "DECIDED: pp8-tp4-ep4" not in text
    result.stdout.fnmatch_lines(["*pp8-tp4-ep4*INVALID: wrong outputs (vs pp4-tp8-ep4*"])
    stored = json.loads((folder / "outputs" / "pp4-tp8-ep4.json").read_text())
    assert stored["format"] == "ppsweep-outputs/1" and len(stored["prompts"]) == 4
    first = stored["prompts"][0]
    assert len(first["output_ids"]) == 8 and len(first["top_logprobs"][0]) == 5


def test_the_probe_can_be_turned_off(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder = sweep_dir(CORRUPT_PP8)
    toml = folder / "ppsweep.toml"
    toml.write_text(toml.read_text() + "\n[correctness]\nenabled = false\n")
    reports = tmp_path / "reports"
    result = run(pytester, folder, reports)
    seen = outcomes(result.stdout.str())
    assert seen["test_outputs_match[pp8-tp4-ep4]"] == "SKIPPED"
    assert result.ret == 0 and not (run_dir(reports) / "outputs").exists()
