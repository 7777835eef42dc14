"""benchmarks/bench_planner.py runs (the seeds' leave-one-layout-out and one hidden profile) and
prints its figures against their goals; the full benchmark is not run in CI."""

from __future__ import annotations

import importlib.util

import pytest
from support.paths import REPO


def test_bench_planner_prints_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_planner",
                                                  REPO / "benchmarks" / "bench_planner.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--profiles", "1"]) == 0
    out = capsys.readouterr().out
    for figure in ("MAPE input_tps@c8", "MAPE ttft_p50_s@c16", "cluster time used",
                   "chosen within 3 % of the true best", "90 % interval coverage"):
        assert figure in out
