"""A run folder in pytest-benchmark's JSON layout, named baselines, and resolving a reference.

``write_benchmark_json`` writes ``<run_dir>/benchmark.json`` exactly as pytest-benchmark 5's
``--benchmark-json`` would (``machine_info``, ``commit_info``, ``benchmarks``, ``datetime``,
``version``; each benchmark with ``group``, ``name``, ``fullname``, ``params``, ``param``,
``extra_info``, ``options`` and ``stats``), so ``pytest-benchmark compare <file> [<file>…]``
displays and compares our runs with its own tables.

One benchmark per configuration × C, named like the shipped test
(``test_matrix/test_sweep.py::test_prefill[pp8-tp4-ep4-c8]``), grouped by C so that the layouts
of one concurrency sit in one table. ``stats`` are over the **round duration** (``duration_s``,
emulated seconds on the emulator) of every valid round (``measure.completion``'s N/N rule):
pytest-benchmark's statistics are timings where lower is better and ``ops`` = rounds/s, and a
round sends the same tokens every time, so its duration is the inverse of Input TPS and its
ranking, its ``--benchmark-compare-fail mean:5%`` and our TPS gate agree. (TTFT p50 would be
lower-is-better too, but does not move with throughput.) Invalid rounds are left out of
``stats`` so a server that fails fast never looks fast; they are counted in ``extra_info``, which
also carries every metric of ours. A point without a valid round cannot have timing stats and is
listed under the extra top-level key ``ppsweep.no_valid_rounds`` (pytest-benchmark ignores it).

Baseline storage: ``<reports>/baselines/<name>/`` holds a copy of the run's ``results.csv``,
``configs.csv``, ``summary.csv`` (when present) and ``metadata/``, plus ``0001_<name>.json``. Our
gate reads it like any run folder. ``<reports>/baselines`` is also a pytest-benchmark file storage
whose "machine id" folders are the baseline names: ``pytest-benchmark --storage reports/baselines
list`` lists the baselines, ``... compare 'gold/*'`` loads one. As ``0001_…`` sorts before
``benchmark.json``, ``pytest-benchmark compare --between median <baseline file>
<run>/benchmark.json`` takes the baseline as its reference column.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pandas as pd

from pytest_ppsweep.folder.runfolder import BENCHMARK_JSON as BENCHMARK_JSON
from pytest_ppsweep.folder.runfolder import (
    CONFIGS_CSV,
    RESULT_COLUMNS,
    RESULTS_CSV,
    RUN_JSON,
    RunJsonDict,
    RunKey,
)
from pytest_ppsweep.results.aggregate import RunData, RunMeta, load_run, round_counts

PB_VERSION = "5.3.1"  # the storage format written; read by pytest-benchmark 4.x and 5.x
TEST_NODE = "test_matrix/test_sweep.py::test_prefill"


def stats(values: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's ``Stats.as_dict()`` plus ``data`` and ``iterations`` for ``values``.

    Same formulas as ``pytest_benchmark.stats.Stats`` (quartiles by Tukey's method 3/2), kept
    here because that class is untyped; tests check the two agree.
    """
    data = [float(v) for v in values]
    if not data:
        raise ValueError("stats of no values")
    s, n = sorted(data), len(data)
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if n > 1 else 0.0
    if n == 1:
        q1 = q3 = s[0]
    elif n % 2:
        k, r = n // 4, n % 4
        q1 = 0.25 * s[k - 1] + 0.75 * s[k] if r == 1 else 0.75 * s[k] + 0.25 * s[k + 1]
        q3 = (0.75 * s[3 * k] + 0.25 * s[3 * k + 1] if r == 1
              else 0.25 * s[3 * k + 1] + 0.75 * s[3 * k + 2])
    else:
        q1, q3 = statistics.median(s[: n // 2]), statistics.median(s[n // 2:])
    iqr = q3 - q1
    low = [v for v in s if v >= q1 - 1.5 * iqr]
    high = [v for v in s if v <= q3 + 1.5 * iqr]
    sd_out = sum(1 for v in data if v < mean - stddev or v > mean + stddev)
    iqr_out = sum(1 for v in data if v < q1 - 1.5 * iqr or v > q3 + 1.5 * iqr)
    total = sum(data)
    return {
        "min": s[0], "max": s[-1], "mean": mean, "stddev": stddev, "rounds": n,
        "median": statistics.median(data), "iqr": iqr, "q1": q1, "q3": q3,
        "iqr_outliers": iqr_out, "stddev_outliers": sd_out, "outliers": f"{sd_out};{iqr_out}",
        "ld15iqr": s[0] if n == 1 else low[0], "hd15iqr": s[0] if n == 1 else high[-1],
        "ops": n / total if total else 0, "total": total, "data": data, "iterations": 1,
    }


def _run_json(run_dir: Path) -> RunJsonDict:
    path = run_dir / RUN_JSON
    raw = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return raw if isinstance(raw, dict) else {}


def load(run_dir: Path) -> RunData:
    """``aggregate.load_run``, but a run that never finished a round (every boot failed, so
    results.csv was never created) loads with no rows instead of failing: the gate must call
    such a run broken, not crash on it."""
    run_dir = Path(run_dir)
    if run_dir.is_dir() and not (run_dir / RESULTS_CSV).exists():
        configs = (pd.read_csv(run_dir / CONFIGS_CSV, dtype={"config_id": str})
                   if (run_dir / CONFIGS_CSV).is_file() else pd.DataFrame(columns=["config_id"]))
        raw = _run_json(run_dir)
        return RunData(run_dir, RunMeta.from_dict(raw, run_dir.name),
                       pd.DataFrame(columns=list(RESULT_COLUMNS)), configs, raw)
    return load_run(run_dir)


def valid_mask(results: pd.DataFrame) -> pd.Series:
    """Rounds that count: the N/N rule of ``measure.completion`` (every request completed, none
    failed, the prompt tokens counted as sent), row by row."""
    return round_counts(results)


def points(results: pd.DataFrame) -> dict[tuple[str, int], pd.DataFrame]:
    """results.csv rows per (config id, concurrency), in first-seen order."""
    out: dict[tuple[str, int], pd.DataFrame] = {}
    if results.empty:
        return out
    for key, rows in results.groupby(["config_id", "concurrency"], sort=False):
        cid, conc = cast(tuple[Any, Any], key)
        out[(str(cid), int(conc))] = rows
    return out


def _floats(frame: pd.DataFrame, column: str) -> list[float]:
    if column not in frame.columns:
        return []
    return [float(v) for v in pd.to_numeric(frame[column], errors="coerce") if math.isfinite(v)]


def _metric_info(valid: pd.DataFrame, column: str) -> dict[str, Any]:
    values = _floats(valid, column)
    med = statistics.median(values) if values else None
    return {
        column: values, f"{column}_median": med,
        f"{column}_min": min(values) if values else None,
        f"{column}_max": max(values) if values else None,
        f"{column}_spread_pct": (max(values) - min(values)) / med * 100.0 if med else None,
    }


def _durations(valid: pd.DataFrame) -> list[float]:
    if "duration_s" in valid.columns and valid["duration_s"].notna().all():
        return _floats(valid, "duration_s")
    # Older folders without duration_s: tokens / TPS is the same number.
    return [t / r for t, r in zip(_floats(valid, "input_tokens"), _floats(valid, "input_tps"),
                                  strict=False) if r]


def _benchmark(run: RunData, config_id: str, conc: int, rows: pd.DataFrame) -> dict[str, Any]:
    valid = rows[valid_mask(rows)].sort_values("repeat")
    first = rows.iloc[0]
    sizes = {k: int(first[k]) for k in ("pp", "tp", "ep") if pd.notna(first.get(k))}
    extra: dict[str, Any] = {
        "run_id": run.meta.run_id, "config_id": config_id, **sizes, "concurrency": conc,
        "stats_of": "round duration_s (emulated s when simulated); lower is better",
        "repeats": [int(r) for r in valid["repeat"]],
        "rounds_total": len(rows), "rounds_invalid": len(rows) - len(valid),
        "num_requests": int(first["num_requests"]),
        "completed": [int(v) for v in pd.to_numeric(rows["completed"], errors="coerce").fillna(0)],
        "failed": [int(v) for v in pd.to_numeric(rows["failed"], errors="coerce").fillna(0)],
        "reused": bool(rows["reused"].astype(str).str.lower().eq("true").any()),
        "simulated": run.meta.simulated, "time_scale": run.meta.time_scale,
    }
    for column in ("input_tps", "ttft_p50_s", "ttft_p95_s"):
        extra.update(_metric_info(valid, column))
    param = f"{config_id}-c{conc}"
    return {
        "group": f"prefill C={conc}",
        "name": f"test_prefill[{param}]",
        "fullname": f"{TEST_NODE}[{param}]",
        "params": {"ppsweep_config": config_id, "concurrency": conc},
        "param": param,
        "extra_info": extra,
        "options": {"disable_gc": False, "timer": "ppsweep.round_duration", "min_rounds":
                    len(rows), "max_time": 0.0, "min_time": 0.0, "warmup": False},
        "stats": stats(_durations(valid)),
    }


def machine_info(run: RunData) -> dict[str, Any]:
    """pytest-benchmark's machine keys for this (load-generating) machine, plus the cluster."""
    raw = run.run_json
    return {
        "node": platform.node(), "processor": platform.processor(),
        "machine": platform.machine(), "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(), "python_build": list(platform.python_build()),
        "release": platform.release(), "system": platform.system(),
        "cpu": {"arch": platform.machine(), "count": os.cpu_count(),
                "brand_raw": platform.processor()},
        "ppsweep_cluster": run.meta.cluster, "ppsweep_hosts": raw.get(RunKey.HOSTS, []),
        "ppsweep_image": run.meta.image, "ppsweep_engine": run.meta.engine,
        "ppsweep_engine_version": run.meta.engine_version,
        "ppsweep_simulated": run.meta.simulated,
    }


def benchmark_json(run_dir: Path, run: RunData | None = None) -> dict[str, Any]:
    """The pytest-benchmark document of ``run_dir`` (see the module docstring); ``run``: what
    was read of it already."""
    run = load(Path(run_dir)) if run is None else run
    benches, empty = [], []
    for (cid, conc), rows in points(run.results).items():
        if valid_mask(rows).any():
            benches.append(_benchmark(run, cid, conc, rows))
        else:
            empty.append(f"{cid}-c{conc}")
    return {
        "machine_info": machine_info(run),
        # The code under test is the image, not a git checkout: only the project is known.
        "commit_info": {"id": "", "time": None, "author_time": None, "dirty": False,
                        "project": str(run.run_json.get(RunKey.SWEEP) or "pytest-ppsweep"),
                        "branch": ""},
        "benchmarks": benches,
        "datetime": datetime.now(UTC).isoformat(),
        "version": PB_VERSION,
        "ppsweep": {"run_id": run.meta.run_id, "no_valid_rounds": empty},
    }


def atomic_text(path: Path, text: str) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    return tmp.replace(path)


def write_benchmark_json(run_dir: Path, filename: str = BENCHMARK_JSON,
                         run: RunData | None = None) -> Path:
    """Write ``<run_dir>/benchmark.json`` (or ``filename``) atomically and return its path."""
    doc = benchmark_json(run_dir, run)
    # ensure_ascii and indent=4 like pytest-benchmark's own FileStorage.save.
    return atomic_text(Path(run_dir) / filename, json.dumps(doc, ensure_ascii=True, indent=4)
                        + "\n")


