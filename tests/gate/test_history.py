"""The run history (gate/history.py): indexed from the run folders, rebuilt to the same rows,
repaired by its readers, safe when two runs close at once, and never the only copy."""

from __future__ import annotations

import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from support.runs import seed_run

from pytest_ppsweep.folder.runfolder import HISTORY_DB
from pytest_ppsweep.gate.history import History, index_at_close
from pytest_ppsweep.report.cli import main


def _reports(tmp_path: Path) -> Path:
    reports = tmp_path / "reports"
    seed_run(reports / "kimi-20261201-090000", sweep="kimi3-pp", image="reg/sglang:v1",
             run_status="complete")
    seed_run(reports / "kimi-20261202-090000", sweep="kimi3-pp", image="reg/sglang:v2",
             run_status="complete", git_commit="0123abc")
    return reports


def _dump(path: Path) -> list[str]:
    con = sqlite3.connect(path)
    try:
        return list(con.iterdump())
    finally:
        con.close()


def test_rebuild_reproduces_the_database_exactly(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    for folder in sorted(p for p in reports.iterdir() if p.is_dir()):
        assert index_at_close(folder) == ""  # what run/close.py does, run by run
    db = reports / HISTORY_DB
    at_close = _dump(db)
    assert any("reg/sglang:v2" in line and "0123abc" in line for line in at_close)
    assert main(["history", "--rebuild", "--reports", str(reports)]) == 0
    assert _dump(db) == at_close
    db.unlink()  # the database is a cache: deleting it loses nothing
    assert main(["history", "--rebuild", "--reports", str(reports)]) == 0
    assert _dump(db) == at_close


def test_a_point_holds_the_median_of_its_valid_repeats_and_its_interval(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    history = History(reports)
    rows = history.trend("kimi3-pp", "input_tps", "pp8-tp4-ep4")
    assert [(r.image, r.concurrency) for r in rows] == [
        ("reg/sglang:v1", 8), ("reg/sglang:v2", 8), ("reg/sglang:v1", 16), ("reg/sglang:v2", 16)]
    import pandas as pd

    res = pd.read_csv(reports / "kimi-20261201-090000" / "results.csv")
    values = res[(res.config_id == "pp8-tp4-ep4") & (res.concurrency == 8)]["input_tps"].tolist()
    first = rows[0]
    assert first.median == pytest.approx(statistics.median(values))
    assert first.repeats == 3
    assert first.low is not None and first.high is not None
    assert first.low < statistics.median(values) < first.high
    record = history.records()[0]
    assert (record.image, record.status, record.correctness, record.accuracy) == (
        "reg/sglang:v2", "complete", None, None)
    assert record.engine_version == "0.5.0" and record.git_commit == "0123abc"


def test_readers_repair_the_index_from_the_folders(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    reports = _reports(tmp_path)
    assert main(["runs", "--reports", str(reports)]) == 0  # not indexed yet: read and indexed
    listed = capsys.readouterr().out
    assert "kimi-20261201-090000" in listed and "kimi-20261202-090000" in listed
    assert len(History(reports).records(sync=False)) == 2
    seed_run(reports / "kimi-20261203-090000", sweep="kimi3-pp", image="reg/sglang:v3")
    import shutil

    shutil.rmtree(reports / "kimi-20261201-090000")
    assert main(["runs", "--reports", str(reports)]) == 0
    listed = capsys.readouterr().out
    assert "kimi-20261203-090000" in listed and "kimi-20261201-090000" not in listed
    assert {r.folder for r in History(reports).records(sync=False)} == {
        "kimi-20261202-090000", "kimi-20261203-090000"}


def test_a_broken_database_never_hides_a_run(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    reports = _reports(tmp_path)
    (reports / HISTORY_DB).write_bytes(b"not a database at all" * 100)
    assert main(["runs", "--reports", str(reports)]) == 0
    captured = capsys.readouterr()
    assert "kimi-20261202-090000" in captured.out
    assert "reading the run folders instead" in captured.err
    assert main(["history", "--rebuild", "--reports", str(reports)]) == 0
    assert len(History(reports).records(sync=False)) == 2


def test_a_failure_to_index_warns_and_keeps_the_run(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    (reports / HISTORY_DB).mkdir()  # cannot be opened as a database
    note = index_at_close(reports / "kimi-20261201-090000")
    assert note.startswith("warning: run not indexed in the history")
    assert "history --rebuild" in note
    assert (reports / "kimi-20261201-090000" / "results.csv").is_file()


def test_two_runs_closing_at_once_do_not_corrupt_it(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    for i in range(6):
        seed_run(reports / f"kimi-2026120{i + 1}-090000", sweep="kimi3-pp", image=f"img:{i}")
    script = ("import sys; from pathlib import Path; from pytest_ppsweep.gate.history import "
              "index_at_close\nfor _ in range(3):\n    for f in sys.argv[1:]:\n"
              "        note = index_at_close(Path(f))\n        assert not note, note\n")
    folders = sorted(str(p) for p in reports.iterdir() if p.is_dir())
    procs = [subprocess.Popen([sys.executable, "-c", script, *folders[i::2]],
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    con = sqlite3.connect(reports / HISTORY_DB)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 6
    finally:
        con.close()


def test_trend_prints_each_point_across_images(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    reports = _reports(tmp_path)
    assert main(["trend", "kimi3-pp", "--layout", "pp8-tp4-ep4", "--metric", "ttft_p50",
                 "--reports", str(reports)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("pp8-tp4-ep4 C=8: TTFT p50 (s)")
    assert "reg/sglang:v1" in out[1] and "reg/sglang:v2" in out[2]
    assert all("[" in line and "n=3" in line for line in out[1:3])
    assert main(["trend", "kimi3-pp", "--metric", "tps", "--reports", str(reports)]) == 2
    assert "expected one of input_tps" in capsys.readouterr().err
    assert main(["trend", "other", "--reports", str(reports)]) == 2
    assert "sweeps: kimi3-pp" in capsys.readouterr().err
    # a name from the command line that is close to one: did you mean, naming its argument
    assert main(["trend", "kimi3-p", "--reports", str(reports)]) == 2
    assert capsys.readouterr().err.startswith(
        "error: SWEEP 'kimi3-p': no run of that sweep in the history of "
        f"{reports} (did you mean 'kimi3-pp'?); sweeps: kimi3-pp")
    assert main(["trend", "kimi3-pp", "--metric", "input_tp", "--reports", str(reports)]) == 2
    assert "(did you mean 'input_tps'?)" in capsys.readouterr().err


def test_compare_takes_an_image_from_the_history(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    reports = _reports(tmp_path)
    assert main(["compare", "reg/sglang:v1", "reg/sglang:v2", "--reports", str(reports)]) == 0
    out = capsys.readouterr().out
    assert "A = kimi-20261201-090000, B = kimi-20261202-090000" in out



def test_the_image_placeholder_gives_each_rank_its_image(tmp_path: Path) -> None:
    """``{image}`` in an env value is the sweep's image (``--ppsweep-image`` included): how an
    emulated rank learns which image it stands for (PPSWEEP_SIM_IMAGE)."""
    from support.matrices import small_matrix
    from support.paths import sweep_folder

    from pytest_ppsweep.cluster.rankspec import rank_specs
    from pytest_ppsweep.matrix.parse import load

    text = small_matrix("\n[[configs]]\npp = 4\ntp = 8\n", net="127.0.6", port=31999,
                        dist=36999, scale=100, state=tmp_path / "state")
    text = text.replace("PPSWEEP_SIM_TIME_SCALE =", 'PPSWEEP_SIM_IMAGE = "{image}", '
                        "PPSWEEP_SIM_TIME_SCALE =")
    folder = sweep_folder(tmp_path / "sweep", text)
    sweep = load(folder / "ppsweep.toml", image="reg/sglang:v6")
    specs = rank_specs(sweep, sweep.clusters["local"], sweep.configs[0])
    assert {s.env["PPSWEEP_SIM_IMAGE"] for s in specs} == {"reg/sglang:v6"}


def test_the_rows_the_close_writes_are_the_rebuilds(tmp_path: Path) -> None:
    """run/close.py indexes from what it computed; a rebuild from the folder alone gives the
    same database, byte for byte in its dump."""
    from support.runs import record_run, seed_points

    from pytest_ppsweep.folder.runfolder import RunStore
    from pytest_ppsweep.gate.comparison import parse_thresholds
    from pytest_ppsweep.run.close import close

    reports = tmp_path / "reports"
    record_run(reports, "ref", seed_points())
    record_run(reports, "cur", seed_points())
    for run_id, ref in (("ref", None), ("cur", reports / "ref")):
        store = RunStore(reports, run_id)
        closed = close(store, list(store.config_rows()), {}, ref, parse_thresholds([]))
        assert closed.history_note == ""
    at_close = _dump(reports / HISTORY_DB)
    assert any("'cur'" in line and "'pass'" in line for line in at_close), at_close[:5]
    History(reports).rebuild()
    assert _dump(reports / HISTORY_DB) == at_close


@pytest.mark.parametrize("verb", ["history", "trend", "bisect"])
def test_each_new_verb_has_its_help(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([verb, "--help"])
    assert done.value.code == 0
    assert "examples:" in capsys.readouterr().out


def test_the_accuracy_column_is_the_runs_pooled_score_and_follows_the_folder(
        tmp_path: Path) -> None:
    """runs.accuracy: right answers over questions asked, every layout pooled
    (results/accuracy.run_accuracy); a score written later is picked up by the next reader."""
    from pytest_ppsweep.matrix.accuracyspec import AccuracySpec, Task
    from pytest_ppsweep.results.accuracy import Answer, layout_accuracy
    from pytest_ppsweep.stats.accuracytest import plan

    reports = _reports(tmp_path)
    run = reports / "kimi-20261202-090000"
    spec = AccuracySpec(tasks_path=tmp_path / "t.jsonl", tasks=(Task("q", "a"),))
    the_plan = plan(0.03, 0.05, 0.2, 10)
    history = History(reports)
    assert history.records()[0].accuracy is None  # no [accuracy]: NULL
    for cid, right in (("pp8-tp4-ep4", 9), ("pp4-tp8-ep4", 6)):
        layout_accuracy(spec, the_plan, cid, [Answer(i, "", "", i < right)
                                              for i in range(10)]).write(run)
    record = next(r for r in history.records() if r.folder == run.name)
    assert record.accuracy == pytest.approx(15 / 20)
    assert main(["history", "--rebuild", "--reports", str(reports)]) == 0
    assert next(r for r in History(reports).records(sync=False)
                if r.folder == run.name).accuracy == pytest.approx(0.75)


def test_the_history_names_an_image_one_way_in_its_charts_and_its_table() -> None:
    """A long image was labelled by its tag under a chart's point and by its last 19
    characters in ``trend``'s table (``v0.5.23-cu129-20261201`` / ``…3-cu129-20261201``): both
    name it by gate/history.image_label, and the chart's tooltip starts with that name."""
    import re

    from pytest_ppsweep.gate.history import TrendRow, image_label, trend_lines
    from pytest_ppsweep.report.trendview import trend_svg

    image = "registry.local:5000/team/sglang:v0.5.23-cu129-20261201"
    rows = [TrendRow("pp8-tp4-ep4", 8, f"2026-12-0{i}T09:00:00", img, f"r{i}", 8000.0 + i,
                     None, None, 3) for i, img in enumerate((image, "reg/sglang@sha256:" +
                                                             "0123456789abcdef" * 4, ""), 1)]
    named = [image_label(r.image) for r in rows]
    assert named == ["v0.5.23-cu129-20261201", "@sha256:0123456789ab", "—"]
    table = trend_lines(rows, "input_tps")
    for label, line in zip(named, table[1:], strict=True):
        assert f" {label} " in line, (label, line)
    svg = trend_svg(rows, "input_tps", "r1")
    labels = re.findall(r'text-anchor="middle">([^<]+)</text>', svg)
    assert [label for label in labels if not re.fullmatch(r"\d\d-\d\d", label)] == named
    tips = re.findall(r"<title>([^<]+)</title></circle>", svg)
    assert tips[0].startswith(f"{named[0]} ({image}) ")
