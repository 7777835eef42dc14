"""A partial run through the plugin: which layouts it selected goes into run.json after -k, the
baseline of an earlier run is chosen (or refused) before anything boots, and on the emulator a
`-k pp8` run after a full one shows deltas vs that run's baseline and no INVALID noise."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from support.paths import REPO, SEED
from support.runs import rows, seed_run

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.session.collection import Selection
from pytest_ppsweep.session.runstate import RunState

PP1 = "pp1-tp32-ep4"


def run(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*[str(a) for a in args], timeout=600)


def _earlier(folder: Path, **server: Any) -> Path:
    """A finished run of the shipped sweep with the baseline manifest it wrote at boot."""
    sweep = load(SEED)
    sweep = replace(sweep, server={**sweep.server, **server})
    seed_run(folder, run_id=folder.name)
    manifest.write(folder, PP1, manifest.build(sweep, sweep.cluster(None), sweep.config(PP1)))
    return folder


def _run_json(reports: Path, run_id: str) -> dict[str, Any]:
    data = json.loads((reports / run_id / "metadata" / "run.json").read_text())
    assert isinstance(data, dict)
    return data


def _dry(pytester: pytest.Pytester, reports: Path, *args: str | Path) -> list[str]:
    """A dry run of the shipped sweep: the selection and the baseline it would use are printed
    (--collect-only and the dry run write no run folder)."""
    before = sorted(reports.iterdir()) if reports.is_dir() else []
    result = run(pytester, REPO / "test_matrix", "--ppsweep-dry-run", "--ppsweep-reports",
                 reports, *args)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert (sorted(reports.iterdir()) if reports.is_dir() else []) == before
    return result.stdout.lines


def _points(lines: list[str]) -> dict[str, str]:
    return {line.split(":")[0]: line.split(" at C = ")[1] for line in lines
            if line.startswith("pp") and ": PP/TP/EP " in line}


def test_xdist_worker_ids_tell_the_selected_layouts_and_cs() -> None:
    seen: list[dict[str, set[int]]] = []
    fake = SimpleNamespace(ids=["pp1-tp32-ep4", "pp1-tp32-ep4-x", "pp8-tp4-ep4"],
                           state=RunState(), selection=seen.append)
    Selection.worker_collected(cast(Any, fake), [
        "test_sweep.py::test_topology[pp8-tp4-ep4]",
        "test_sweep.py::test_prefill[pp8-tp4-ep4-c16]@pp8-tp4-ep4",
        "test_sweep.py::test_prefill[pp1-tp32-ep4-x-c8]",
        "test_sweep.py::test_other",
    ])
    assert seen == [{"pp8-tp4-ep4": {16}, "pp1-tp32-ep4-x": {8}}]


def test_k_records_the_selection_and_the_newest_matching_baseline(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    _earlier(reports / "old")
    _earlier(reports / "changed", chunked_prefill_size=16384)  # newer, but differs
    lines = _dry(pytester, reports, "-k", "pp8")
    assert _points(lines) == {"pp8-tp4-ep4": "8, 16"}
    text = "\n".join(lines)
    assert f"baseline {PP1}: run changed: server.chunked_prefill_size: 16384 → 8192" in text
    assert f"baseline {PP1} not in this run: deltas vs its rounds in run old" in text


def test_k_without_an_earlier_run_says_so_once(pytester: pytest.Pytester, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    lines = _dry(pytester, reports, "--ppsweep-config", "pp8")
    assert [line for line in lines if line.startswith("baseline ")] == [
        f"baseline {PP1} is not in this run and no earlier run in {reports} has a matching one: "
        "no deltas"]


def test_a_full_selection_uses_its_own_baseline(pytester: pytest.Pytester, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    _earlier(reports / "old")
    lines = _dry(pytester, reports)
    assert not [line for line in lines if line.startswith("baseline ")]
    assert len(_points(lines)) == 5


def test_baseline_from_that_differs_is_a_usage_error_before_anything_boots(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    _earlier(reports / "changed", chunked_prefill_size=16384, mem_fraction_static=0.8)
    result = run(pytester, REPO / "test_matrix", "-k", "pp8", "--ppsweep-reports", reports,
                 "--ppsweep-baseline-from", "changed")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"*--ppsweep-baseline-from changed: the baseline {PP1} of {reports / 'changed'} cannot "
        "stand for this run's: *server.chunked_prefill_size: 16384 → 8192*"
    ])
    assert "mem_fraction_static: 0.8 → 0.88" in result.stderr.str()
    assert sorted(p.name for p in reports.iterdir()) == ["changed"]  # no run folder, no boot


def test_baseline_from_picks_the_run_explicitly(pytester: pytest.Pytester, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    chosen = _earlier(tmp_path / "elsewhere" / "chosen")  # a path, outside the reports folder
    _earlier(reports / "newer")
    lines = _dry(pytester, reports, "-k", "pp8", "--ppsweep-baseline-from", chosen)
    assert f"baseline {PP1} not in this run: deltas vs its rounds in run chosen " \
           "(--ppsweep-baseline-from, manifest identical except layout)" in lines


# (no "pp8" in this test's name: -k matches the names of the folders pytester runs in too)
def test_k_after_a_full_run_shows_deltas_vs_its_baseline(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder, reports = sweep_dir(), tmp_path / "reports"
    full = run(pytester, folder, "--ppsweep-reports", reports, "--ppsweep-run-id", "full")
    full.assert_outcomes(passed=16, deselected=4)
    part = run(pytester, folder, "-k", "pp8", "--ppsweep-reports", reports,
               "--ppsweep-run-id", "part")
    part.assert_outcomes(passed=8, deselected=12)
    text = part.stdout.str()
    summary = text[text.index("ppsweep summary: part"):]
    assert "baseline pp4-tp8-ep4 from run full (manifest identical except layout)" in summary
    # PP4 was only deselected: no verdict, no row, no n/a; PP8 has its deltas (its verdicts
    # may still say INVALID for the emulator's spread on a busy machine)
    assert "pp4-tp8-ep4 C=" not in summary and "4 / 8 / 4" not in summary
    assert "no configs.csv row" not in summary and "n/a" not in summary
    pp8 = [line for line in summary.splitlines() if line.startswith("8 / 4 / 4")]
    assert len(pp8) == 2 and all(line.count(" %") == 2 for line in pp8), summary
    table = rows(reports / "part" / "summary.csv")
    assert {r["config_id"] for r in table} == {"pp8-tp4-ep4"}
    assert {r["baseline_from"] for r in table} == {"full"}
    assert all(r["tps_vs_base_pct"] for r in table)
    assert "from run full (manifest identical except layout)" in (
        reports / "part" / "report.html").read_text()
    # one point is measured, not decided; its Δ is against the stored baseline, and says so
    (answer,) = json.loads((reports / "part" / "answers.json").read_text())["answers"]
    assert answer["status"] == "measured" and answer["answer"] == "pp8-tp4-ep4", answer
    assert answer["text"].endswith("Its Δ in the summary is against the stored baseline "
                                   "pp4-tp8-ep4 of run full."), answer["text"]
    assert sorted(p.name for p in (reports / "part" / "service").iterdir()) == ["pp8-tp4-ep4"]
    # The partial run's resume command measures the rest: its selection (-k) is dropped.
    (resume,) = [line for line in text.splitlines() if line.startswith("resume: ")]
    assert " -k " not in resume and resume.endswith("--ppsweep-resume part"), resume
    rest = run(pytester, folder, "--ppsweep-reports", reports, "--ppsweep-resume", "part")
    assert rest.ret == 0, rest.stdout.str()[-3000:]
    assert "run status: COMPLETE, 2 of 2 layouts measured" in rest.stdout.str()
    assert {r["config_id"] for r in rows(reports / "part" / "summary.csv")} == {
        "pp8-tp4-ep4", "pp4-tp8-ep4"}


def test_ppsweep_config_is_a_partial_run_of_the_sweep(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    """--ppsweep-config narrows the run as -k does: two of the sweep's three layouts measured is
    PARTIAL, the answer is not decided about the whole question, and the layout left out is not
    run (never INVALID); its resume measures the rest."""
    from support.matrices import CONFIGS

    folder = sweep_dir(CONFIGS + "\n[[configs]]\npp = 2\ntp = 16\n")
    reports = tmp_path / "reports"
    part = run(pytester, folder, "--ppsweep-config", "pp4,pp8", "--ppsweep-reports", reports,
               "--ppsweep-run-id", "sub")
    text = part.stdout.str()
    assert "run status: PARTIAL, 2 of 3 layouts measured; not measured: pp2-tp16-ep4" in text, (
        text[-3000:])
    assert "COMPLETE" not in text and "INVALID: no configs.csv row" not in text
    meta = json.loads((reports / "sub" / "metadata" / "run.json").read_text())
    assert meta["run_status"] == "partial"
    assert meta["order"] == ["pp4-tp8-ep4", "pp8-tp4-ep4", "pp2-tp16-ep4"]
    answers = json.loads((reports / "sub" / "answers.json").read_text())["answers"]
    layout = next(a for a in answers if a["kind"] == "layout")
    assert layout["status"] != "decided", layout
    assert "pp2-tp16-ep4 not run" in json.dumps(layout), layout
    (resume,) = [line for line in text.splitlines() if line.startswith("resume: ")]
    assert "--ppsweep-config" not in resume, resume
