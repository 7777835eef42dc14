"""``python -m pytest_ppsweep runs|show|report|compare``: outputs, files, exit codes, error
messages, help."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.runs import (
    SEED_LAYOUTS,
    SEED_MEDIANS,
    Medians,
    config_row,
    rounds,
    seed_points,
    seed_run,
    write_run,
)

from pytest_ppsweep import gate
from pytest_ppsweep.report.cli import EXIT_MISSING, main
from pytest_ppsweep.report.terminal import terminal_summary
from pytest_ppsweep.results.pipeline import analyse

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    if columns is not None:  # the terminal's width the command fits its tables to
        env["COLUMNS"] = str(columns)
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


# -- runs / show / --help ----------------------------------------------------------------------

OLD, GATED, NEW = "kimi3-pp-20261130-101500", "kimi3-pp-20261201-080000", "kimi3-pp-20261201-093000"


def _slower(factor: float) -> Medians:
    return {c: {k: (v[0] * factor, v[1] / factor, v[2] / factor) for k, v in rows.items()}
            for c, rows in SEED_MEDIANS.items()}


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    """A reports folder: an old run; a run gated against it (2 × 10 points regressed); a newer
    run with one noisy point (INVALID) that passed its gate; a folder that is no run, and the
    named baselines (not listed)."""
    root = tmp_path / "reports"
    seed_run(root / OLD, sweep="kimi3-pp", image="lmsysorg/sglang:v0.5.8")
    seed_run(root / GATED, _slower(0.9), sweep="kimi3-pp", image="local/sglang:new-image")
    gate.write_comparison_csv(root / GATED, gate.compare(root / GATED, root / OLD))
    rows = [r for p in seed_points() for r in rounds(p, jitter=0.05 if (
        p.config_id, p.concurrency) == ("pp2-tp16-ep4", 16) else None)]
    configs = [config_row(cid, *spec[:3], order, spec[3])
               for order, (cid, spec) in enumerate(SEED_LAYOUTS.items())]
    write_run(root / NEW, rows, configs, sweep="kimi3-pp", image="lmsysorg/sglang:v0.5.8")
    gate.write_comparison_csv(root / NEW, gate.compare(root / OLD, root / OLD))
    (root / "scratch").mkdir()
    seed_run(root / "baselines" / "gold")
    return root


def test_runs_lists_newest_first(reports: Path) -> None:
    done = _cli("runs", "--reports", str(reports))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines if str(reports) not in line), lines
    assert lines[0].split() == ["run", "id", "date", "sweep", "image", "cluster", "lay",
                                "val/inv", "gate"]
    table = [line for line in lines[1:] if line.startswith("kimi3-pp-")]
    assert [line.split()[0] for line in table] == [NEW, GATED, OLD]
    new, gated, old = (line.split() for line in table)
    assert new[1:3] == ["2026-12-01", "09:30"] and new[3] == "kimi3-pp"
    assert new[4] == "…glang:v0.5.8" and new[5] == "sim-4x8"  # an image keeps its tag
    assert new[6:] == ["5", "9/1", "pass"]
    assert gated[4] == "…ng:new-image" and gated[6:] == ["5", "10/0", "20", "regressions"]
    assert old[6:] == ["5", "10/0", "—"]
    # A folder without metadata/run.json is named, the baselines are not runs of the listing.
    missing = reports / "scratch" / "metadata" / "run.json"
    assert f"skipped scratch: missing file: {missing}" in lines
    assert "gold" not in done.stdout


def test_runs_of_a_missing_or_empty_folder(tmp_path: Path) -> None:
    done = _cli("runs", "--reports", str(tmp_path / "nope"))
    assert done.returncode == EXIT_MISSING
    assert f"missing reports folder: {tmp_path / 'nope'}" in done.stderr
    assert "Traceback" not in done.stderr
    done = _cli("runs", "--reports", str(tmp_path))
    assert done.returncode == 0 and done.stdout == f"no runs in {tmp_path}\n"


def test_show_prints_the_plugins_summary(reports: Path) -> None:
    before = sorted(p.relative_to(reports) for p in reports.rglob("*"))
    done = _cli("show", GATED, "--reports", str(reports), columns=100)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # (The plugin prints each REGRESSION message whole, as pytest does: those may be longer.)
    assert all(len(line) <= 100 for line in lines
               if str(reports) not in line and not line.startswith("REGRESSION")), lines
    assert lines[0].startswith("=") and f" ppsweep summary: {GATED} " in lines[0]
    # The same lines as the plugin printed: report/terminal.py on the run folder's files.
    _, summary, verdicts, rec = analyse(reports / GATED)
    expected = terminal_summary(summary, verdicts, rec, width=100)
    assert lines[1:1 + len(expected)] == expected
    assert any(line.startswith("8 / 4 / 4") and line.endswith("VALID") for line in lines)
    text = " ".join(lines)
    assert "[layout] DECIDED: pp8-tp4-ep4, fallback pp4-tp8-ep4" in text
    assert "answers: layout pp8-tp4-ep4" in text
    gate_at = next(i for i, line in enumerate(lines) if "ppsweep gate (gate.csv)" in line)
    assert "regression" in lines[gate_at + 2]
    assert sum(line.startswith("REGRESSION pp") for line in lines) == 20
    assert lines[-2:] == [f"run folder: {reports / GATED}", "report: (no report.html)"]
    # show reads only: nothing was written into the reports folder.
    assert sorted(p.relative_to(reports) for p in reports.rglob("*")) == before
    # at 80 columns its tables fit 80 columns
    narrow = _cli("show", GATED, "--reports", str(reports), columns=80).stdout.splitlines()
    at_80 = terminal_summary(summary, verdicts, rec, width=80)
    assert narrow[1:1 + len(at_80)] == at_80 and all(len(line) <= 80 for line in at_80)


def test_show_by_path_and_without_gate(reports: Path) -> None:
    done = _cli("show", str(reports / OLD))
    assert done.returncode == 0, done.stderr
    assert "ppsweep gate" not in done.stdout
    assert "8 / 4 / 4" in done.stdout and "+170.40 %" in done.stdout


def test_show_names_what_is_missing(reports: Path, tmp_path: Path) -> None:
    done = _cli("show", "nope", "--reports", str(reports))
    assert done.returncode == EXIT_MISSING
    assert f"missing run folder: nope (looked for nope and {reports / 'nope'})" in done.stderr
    (reports / OLD / "configs.csv").unlink()
    done = _cli("show", str(reports / OLD))
    assert done.returncode == EXIT_MISSING
    assert f"missing file: {reports / OLD / 'configs.csv'}" in done.stderr
    assert "Traceback" not in done.stderr


def test_help_documents_every_verb() -> None:
    done = _cli("--help")
    assert done.returncode == 0, done.stderr
    for verb in ("runs", "show", "report", "compare"):
        assert f"  {verb}  " in done.stdout or f"  {verb} " in done.stdout, verb
        assert f"python -m pytest_ppsweep {verb}" in done.stdout, verb
    assert "Exit status" in done.stdout
    for verb, option in (("runs", "--reports DIR"), ("show", "RUN"), ("report", "RUN"),
                         ("compare", "RUN_A")):
        sub = _cli(verb, "--help")
        assert sub.returncode == 0, sub.stderr
        assert option in sub.stdout and "example" in sub.stdout, sub.stdout
        assert f"python -m pytest_ppsweep {verb} " in sub.stdout


# -- one CLI (issue 28 point 5) ----------------------------------------------------------------


def test_every_verb_takes_an_id_a_unique_prefix_or_a_path(
        reports: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = NEW[:-3]  # kimi3-pp-20261201-093 matches only NEW
    assert main(["show", prefix, "--reports", str(reports)]) == 0
    assert f"run folder: {reports / NEW}" in capsys.readouterr().out
    assert main(["report", prefix, "--reports", str(reports)]) == 0
    assert (reports / NEW / "report-rebuilt.html").is_file()
    assert main(["compare", OLD, prefix, "--reports", str(reports)]) == 0
    assert (reports / NEW / f"compare-{OLD}.csv").is_file()
    capsys.readouterr()
    assert main(["show", "kimi3-pp-20261201", "--reports", str(reports)]) == EXIT_MISSING
    assert (f"ambiguous run id prefix: kimi3-pp-20261201 matches 2 runs in {reports}: "
            f"{GATED}, {NEW}") in capsys.readouterr().err
    for verb in ("runs", "show", "report", "compare", "fit", "plan"):
        with pytest.raises(SystemExit):
            main([verb, "--help"])
        assert "--reports DIR" in capsys.readouterr().out, verb


def test_runs_prints_whole_ids_fitted_to_the_terminal(
        reports: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    long_id = "kimi3-pp-a2a-flashinfer-phase5-20261201-110000"
    seed_run(reports / long_id, sweep="kimi3-pp-a2a", image="lmsysorg/sglang:v0.5.8")
    for columns in (60, 90, 100, 160):
        monkeypatch.setenv("COLUMNS", str(columns))  # what shutil.get_terminal_size reads first
        assert main(["runs", "--reports", str(reports)]) == 0
        out = capsys.readouterr().out
        table = [x for x in out.splitlines() if x.startswith("kimi3-pp")]
        assert [x.split()[0] for x in table] == [long_id, NEW, GATED, OLD]  # every id whole
        # (at 60 columns a 46-character id and the date leave no room: the id stays whole)
        assert columns < 90 or all(len(x) <= columns for x in table), (columns, table)
        # each run's status and answers under it: wrapped to the width, nothing cut
        under = [x for x in out.splitlines() if x.startswith(" ")]
        assert any(x.startswith("  answers: ") for x in under), out
        assert all(len(x) <= columns and "…" not in x for x in under), (columns, under)
        if columns == 160:  # room for the whole image
            assert table[1].split()[4] == "lmsysorg/sglang:v0.5.8", table[1]
    # the id copied from `runs` is what show takes
    assert main(["show", long_id, "--reports", str(reports)]) == 0


def test_runs_wraps_a_long_status_and_answers_line_whole() -> None:
    """A run's status and answers under its row wrap to the terminal; no word of them is cut."""
    from pytest_ppsweep.report.cli import RunLine, runs_lines

    answers = ("layout pp8-tp4-ep4 (fallback pp4-tp8-ep4); a2a deepep equivalent to none; "
               "slo: most load pp8-tp4-ep4 at 0.45-0.6 req/s; cheapest pp4-tp8-ep4")
    status = "partial, 4 of 5 layouts measured; not measured: pp16-tp2-ep2 (boot failed)"
    line = RunLine("kimi3-pp-20261201-093000", None, "kimi3-pp", "img", "c", 5, 10, 0, "—",
                   answers, status)
    lines = runs_lines([(Path("kimi3-pp-20261201-093000"), line)], 60)
    under = lines[2:]
    assert all(len(x) <= 60 for x in under) and "…" not in "".join(under), under
    assert under[0].startswith("  status: ") and any(x.startswith("  answers: ") for x in under)
    assert " ".join(x.strip() for x in under) == f"status: {status} answers: {answers}"


def test_a_pipe_closed_early_ends_quietly(reports: Path) -> None:
    """``runs | head``: the reader is gone before the table is written."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest_ppsweep", "runs", "--reports",
                             str(reports)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # closed before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert err == "", err


def test_compare_shows_noise_and_significance_by_the_gates_rule(reports: Path) -> None:
    from pytest_ppsweep.gate.comparison import compare

    done = _cli("compare", OLD, GATED, "--reports", str(reports))
    assert done.returncode == 0, done.stderr
    assert "n/a%" not in done.stdout
    lines = done.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines if str(reports) not in line), lines
    assert "± = noise by the gate's rule" in done.stdout
    gate = {(c.config_id, c.concurrency, c.metric): c for c in compare(reports / GATED,
                                                                        reports / OLD)}
    rows = list(csv.DictReader((reports / GATED / f"compare-{OLD}.csv").open()))
    assert len(rows) == 10
    for r in rows:
        g = gate[(r["config_id"], int(r["concurrency"]), "input_tps")]
        assert float(r["tps_noise_pct"]) == pytest.approx(g.noise_pct)
        assert r["tps_verdict"] == g.verdict == "regression"
    assert sum(line.endswith("  REGR/REGR") for line in lines) == 10, lines


def test_show_prints_the_runs_own_summary_with_its_slo_searches(tmp_path: Path) -> None:
    """``show`` prints what the run's end printed: besides the medians and answers, the SLO
    searches (each layout's bracket and the Pareto front), from the folder alone."""
    import shutil

    from support.paths import REPO
    from support.slo import searched

    from pytest_ppsweep.report.cli import show_lines
    from pytest_ppsweep.report.summary import render

    run = tmp_path / "reports" / "ppsweep"
    shutil.copytree(REPO / "tests" / "data" / "answers" / "ppsweep", run)
    searched(run, "pp8-tp4-ep4", 0.45, 0.6)
    searched(run, "pp4-tp8-ep4", 0.2, 0.3)
    shown = show_lines(run, 100)
    ended = render(run, width=100).terminal
    assert any("SLO searches" in line for line in ended), ended
    start = shown.index(ended[0])
    assert shown[start:start + len(ended)] == ended, "\n".join(shown)


def test_show_wraps_the_gate_table_at_80_columns_and_cuts_nothing(tmp_path: Path) -> None:
    """``show`` at 80 columns once cut the gate table after the current value (Δ %,
    threshold and noise lost): it wraps as the live summary does, every value kept."""
    import shutil

    from support.paths import REPO

    from pytest_ppsweep.gate.comparison import Comparison, write_comparison_csv
    from pytest_ppsweep.report.cli import show_lines

    run = tmp_path / "reports" / "ppsweep"
    shutil.copytree(REPO / "tests" / "data" / "answers" / "ppsweep", run)
    long_id = "pp8-tp4-ep4-chunk16384-a2a_deepep"  # longer than the old 17-character cut
    write_comparison_csv(run, [
        Comparison(long_id, 16, "input_tps", 8812.34, 8123.45, -7.82, -3.0, 1.4, "regression",
                   "slower"),
        Comparison("pp4-tp8-ep4", 8, "ttft_p50", 1.25, 1.26, 0.8, 10.0, 2.5, "ok", "same")])
    shown = show_lines(run, 80)
    over = [ln for ln in shown if len(ln) > 80 and not ln.startswith(("run folder: ", "report: "))]
    assert not over, over  # (a path stays whole, to be copied)
    gate = shown[next(i for i, ln in enumerate(shown) if "ppsweep gate" in ln):]
    text = "\n".join(gate)
    for value in (long_id, "8,812.34", "8,123.45", "-7.82", "-3", "1.4", "+0.80", "+10", "2.5",
                  "regression: 1"):
        assert value in text, (value, text)
