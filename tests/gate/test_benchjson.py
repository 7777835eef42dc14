"""benchmark.json in pytest-benchmark's layout, read back by its own CLI; named baselines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_benchmark.stats import Stats
from support.runs import NUM_REQUESTS, Point, record_run, rounds, seed_trio

from pytest_ppsweep.gate.baselines import BaselineError, resolve, save_baseline
from pytest_ppsweep.gate.benchjson import benchmark_json, stats, write_benchmark_json
from pytest_ppsweep.results.aggregate import RunFolderError


@pytest.mark.parametrize("values", [[2.5], [3.0, 1.0], [74.4, 74.9, 74.6],
                                    [5.0, 1.0, 4.0, 2.0, 3.0], [1, 9, 2, 8, 3, 7, 4, 30]])
def test_stats_match_pytest_benchmark(values: list[float]) -> None:
    theirs = Stats()  # type: ignore[no-untyped-call]
    for v in values:
        theirs.update(float(v))  # type: ignore[no-untyped-call]
    ours = stats(values)
    assert {k: ours[k] for k in Stats.fields} == pytest.approx(theirs.as_dict())  # type: ignore[no-untyped-call]
    assert ours["data"] == [float(v) for v in values] and ours["iterations"] == 1


def test_document_layout(tmp_path: Path) -> None:
    bad = rounds(Point("pp4-tp8-ep4", 4, 8, 4, 8, 7000.0, 17.0, 18.0), run_id="cur")
    for row in bad:
        row.update(completed=NUM_REQUESTS - 1, failed=1)
    run = record_run(tmp_path, "cur", seed_trio(), rows=bad)
    doc = benchmark_json(run)
    assert set(doc) == {"machine_info", "commit_info", "benchmarks", "datetime", "version",
                        "ppsweep"}
    assert doc["ppsweep"]["no_valid_rounds"] == ["pp4-tp8-ep4-c8"]
    bench = next(b for b in doc["benchmarks"] if b["param"] == "pp8-tp4-ep4-c8")
    assert bench["name"] == "test_prefill[pp8-tp4-ep4-c8]"
    assert bench["fullname"] == "test_matrix/test_sweep.py::test_prefill[pp8-tp4-ep4-c8]"
    assert bench["group"] == "prefill C=8"
    assert bench["params"] == {"ppsweep_config": "pp8-tp4-ep4", "concurrency": 8}
    assert bench["stats"]["rounds"] == 3
    assert bench["stats"]["median"] == pytest.approx(16_384 * 40 / 8809.5)  # round duration
    extra = bench["extra_info"]
    assert extra["input_tps_median"] == pytest.approx(8809.5)
    assert extra["input_tps_spread_pct"] == pytest.approx(0.6)
    assert extra["ttft_p50_s_median"] == pytest.approx(13.47)
    assert extra["ttft_p95_s_median"] == pytest.approx(16.45)
    assert (extra["pp"], extra["tp"], extra["ep"]) == (8, 4, 4)
    assert extra["completed"] == [40, 40, 40] and extra["reused"] is False
    assert doc["machine_info"]["ppsweep_cluster"] == "local"
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN leaks out of pandas


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "PY_COLORS": "0"}
    return subprocess.run([sys.executable, "-m", "pytest_benchmark", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_pytest_benchmark_compare_reads_our_file(tmp_path: Path) -> None:
    path = write_benchmark_json(record_run(tmp_path, "cur", seed_trio()))
    res = _cli(tmp_path, "compare", "--columns", "min,median,max,rounds", str(path))
    assert res.returncode == 0, res.stderr
    for name in ("test_prefill[pp1-tp32-ep4-c8]", "test_prefill[pp16-tp2-ep2-c16]"):
        assert name in res.stdout
    assert "prefill C=8" in res.stdout and "Failed to load" not in res.stdout + res.stderr


def test_pytest_benchmark_compares_two_of_our_files(tmp_path: Path) -> None:
    ref = record_run(tmp_path, "ref", seed_trio())
    cur = record_run(tmp_path, "cur", seed_trio(**{"pp8-tp4-ep4@8": (8200.0, 14.0, 17.0)}))
    files = [str(write_benchmark_json(ref)), str(write_benchmark_json(cur))]
    res = _cli(tmp_path, "compare", *files)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("test_prefill[pp8-tp4-ep4-c8]") == 2
    between = _cli(tmp_path, "compare", "--between", "median", *files)
    assert between.returncode == 0, between.stderr
    assert "test_prefill[pp8-tp4-ep4-c8]" in between.stdout and "ERROR" not in between.stdout


def test_save_baseline_and_resolve(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    run = record_run(reports, "kimi3-pp-20250101-000000", seed_trio())
    base = save_baseline(run, "gold", reports)
    assert base == reports / "baselines" / "gold"
    for name in ("results.csv", "configs.csv", "metadata/run.json", "metadata/baseline.json",
                 "0001_gold.json"):
        assert (base / name).is_file(), name
    assert resolve("gold", reports) == base
    assert resolve(str(base / "0001_gold.json"), reports) == base
    assert resolve("kimi3-pp-20250101-000000", reports) == run
    assert resolve(str(run), reports) == run
    with pytest.raises(BaselineError, match="already exists"):
        save_baseline(run, "gold", reports)
    assert save_baseline(run, "gold", reports, replace=True) == base
    with pytest.raises(BaselineError, match=r"baseline name '\.\./x'"):
        save_baseline(run, "../x", reports)


def test_baselines_folder_is_a_pytest_benchmark_storage(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    old = record_run(reports, "old", seed_trio())
    save_baseline(old, "gold", reports)
    new = record_run(reports, "new", seed_trio(**{"pp8-tp4-ep4@8": (8200.0, 14.0, 17.0)}))
    listed = _cli(tmp_path, "--storage", str(reports / "baselines"), "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip().endswith("gold/0001_gold.json")
    alone = _cli(tmp_path, "--storage", str(reports / "baselines"), "compare", "gold/*")
    assert alone.returncode == 0, alone.stderr
    assert "test_prefill[pp8-tp4-ep4-c8]" in alone.stdout
    # pytest-benchmark cannot mix a storage glob with a file path (commonpath of relative and
    # absolute paths), so the two runs go in as files; the baseline's 0001_ name sorts first.
    files = [str(reports / "baselines" / "gold" / "0001_gold.json"),
             str(write_benchmark_json(new))]
    res = _cli(tmp_path, "compare", "--between", "median", *files[::-1])
    assert res.returncode == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if "[pp8-tp4-ep4-c8]" in line)
    assert row.split()[-1] == "+7.4%"  # the baseline is the reference: rounds got 7.4 % longer


def test_resolve_errors_name_what_was_looked_for(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    with pytest.raises(BaselineError) as err:
        resolve("silver", reports)
    assert str(reports / "baselines" / "silver") in str(err.value)
    assert str(reports / "silver") in str(err.value)
    (reports / "empty").mkdir(parents=True)
    with pytest.raises(RunFolderError, match=r"has no results\.csv"):
        resolve("empty", reports)


def test_baseline_is_a_run_folder_for_the_gate(tmp_path: Path) -> None:
    from pytest_ppsweep.gate.comparison import compare, regressions

    reports = tmp_path / "reports"
    base = save_baseline(record_run(reports, "old", seed_trio()), "gold", reports)
    shutil.rmtree(reports / "old")  # the baseline stands on its own
    cur = record_run(reports, "new", seed_trio(**{"pp1-tp32-ep4@16": (3000.0, 78.39, 80.88)}))
    assert [r.config_id for r in regressions(compare(cur, resolve("gold", reports)))] == [
        "pp1-tp32-ep4"]
    assert base.is_dir()
