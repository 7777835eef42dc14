"""``python -m pytest_ppsweep report|compare``: outputs, files, exit codes, error messages."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.runs import SEED_MEDIANS, seed_run

from pytest_ppsweep.report.cli import EXIT_MISSING, main

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run([sys.executable, "-m", "pytest_ppsweep", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=60, check=False)


def test_report_rebuilds_csv_and_html(tmp_path: Path) -> None:
    run = seed_run(tmp_path / "kimi3-pp-1")
    done = _cli("report", str(run))
    assert done.returncode == 0, done.stderr
    assert f"report: {run / 'report-rebuilt.html'}" in done.stdout
    assert "8 / 4 / 4" in done.stdout and "+170.40 %" in done.stdout
    # The tables fit 100 columns; only lines naming this machine's paths may be longer.
    assert all(len(line) <= 100 for line in done.stdout.splitlines() if str(run) not in line)
    html = (run / "report-rebuilt.html").read_text(encoding="utf-8")
    assert "<svg" in html and "pp8-tp4-ep4" in html
    with (run / "summary.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 10
    pp8 = next(r for r in rows if r["config_id"] == "pp8-tp4-ep4" and r["concurrency"] == "8")
    assert float(pp8["tps_vs_base_pct"]) == pytest.approx(170.40, abs=0.01)
    assert float(pp8["tps_step_pct"]) == pytest.approx(23.12, abs=0.01)


def test_compare_two_runs(tmp_path: Path) -> None:
    medians = {c: {k: (v[0] * 1.10, v[1] * 0.9, v[2]) for k, v in rows.items()}
               for c, rows in SEED_MEDIANS.items()}
    run_a = seed_run(tmp_path / "run-a")
    run_b = seed_run(tmp_path / "run-b", medians)
    done = _cli("compare", str(run_a), str(run_b))
    assert done.returncode == 0, done.stderr
    out = run_b / "compare-run-a.csv"
    assert f"written: {out}" in done.stdout
    assert "+10.00%" in done.stdout and "-10.00%" in done.stdout
    assert all(len(line) <= 100 for line in done.stdout.splitlines())
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 10
    assert {round(float(r["tps_delta_pct"]), 2) for r in rows} == {10.0}
    assert {round(float(r["ttft_p50_delta_pct"]), 2) for r in rows} == {-10.0}


def test_missing_folder_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    done = _cli("report", str(missing))
    assert done.returncode == EXIT_MISSING
    assert f"missing run folder: {missing}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("relative", ["results.csv", "configs.csv", "metadata/run.json"])
def test_missing_file_names_the_path(tmp_path: Path, relative: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    run = seed_run(tmp_path / "run")
    (run / relative).unlink()
    assert main(["report", str(run)]) == EXIT_MISSING
    assert f"missing file: {run / relative}" in capsys.readouterr().err


def test_compare_names_the_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = seed_run(tmp_path / "run")
    assert main(["compare", str(run), str(tmp_path / "other")]) == EXIT_MISSING
    assert f"missing run folder: {tmp_path / 'other'}" in capsys.readouterr().err


def test_missing_column_and_bad_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = seed_run(tmp_path / "run")
    text = (run / "results.csv").read_text().replace("input_tps,", "tps,", 1)
    (run / "results.csv").write_text(text)
    assert main(["report", str(run)]) == EXIT_MISSING
    assert f"{run / 'results.csv'}: missing column(s) input_tps" in capsys.readouterr().err
    run2 = seed_run(tmp_path / "run2")
    (run2 / "metadata" / "run.json").write_text("{not json")
    assert main(["report", str(run2)]) == EXIT_MISSING
    assert f"{run2 / 'metadata' / 'run.json'}: not valid JSON" in capsys.readouterr().err


def test_usage_error_exit_2() -> None:
    done = _cli()
    assert done.returncode == 2 and "usage:" in done.stderr
