"""run/close.py: the run folder closed once; its results read once and handed to benchmark.json,
the results pipeline (summary.csv, answers.json) and the gate."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.runs import record_run, seed_points

from pytest_ppsweep.folder.runfolder import RESULTS_CSV, RunStore
from pytest_ppsweep.gate.comparison import parse_thresholds
from pytest_ppsweep.results import aggregate
from pytest_ppsweep.run.close import close


def test_close_reads_the_results_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = record_run(tmp_path / "ref", "ref", seed_points())
    cur = record_run(tmp_path, "cur", seed_points())
    store = RunStore(tmp_path, "cur")
    reads: list[Path] = []
    real = aggregate._read_csv

    def counted(path: Path, *args: object) -> object:
        reads.append(Path(path))
        return real(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(aggregate, "_read_csv", counted)
    closed = close(store, list(store.config_rows()), {}, ref, parse_thresholds([]))
    assert closed.analysis is not None and closed.gate
    assert (cur / "benchmark.json").is_file() and (cur / "summary.csv").is_file()
    assert reads.count(cur / RESULTS_CSV) == 1
    assert reads.count(ref / RESULTS_CSV) == 1
