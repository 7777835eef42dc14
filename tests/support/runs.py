"""Run folders: read a sweep's run folder; build synthetic ones for the report and gate tests.

One factory: :class:`Point` (wanted medians of a configuration at one concurrency), :func:`rounds`
(its results.csv rows), the seed report's numbers (:data:`SEED_LAYOUTS`, :data:`SEED_MEDIANS`,
:func:`seed_points`), and two writers of the layout in docs/ARCHITECTURE.md:

* :func:`write_run` writes results.csv, configs.csv and metadata/run.json directly from rows
  (any configs.csv row, hostile or broken, for the report tests);
* :func:`record_run` records points through the real RunStore, as a sweep does (the gate tests).

Each point gets ``repeats`` rounds spread symmetrically around the wanted median (offsets of
``jitter``), so the median of the rounds is exactly the wanted value and the spread
(max − min) / median is ``2 × jitter`` for three repeats.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pytest_ppsweep.folder.runfolder import RunStore

NUM_REQUESTS = 40
PROMPT_TOKENS = 16_384 * NUM_REQUESTS
GPU_TOTAL_MIB = 85_651


def rows(csv_path: Path) -> list[dict[str, str]]:
    """A CSV of the run folder as dicts ([] when it does not exist yet)."""
    if not csv_path.exists():
        return []
    with csv_path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def run_dir(reports: Path) -> Path:
    """The one run folder in ``reports``."""
    runs = [p for p in reports.iterdir() if p.is_dir()]
    assert len(runs) == 1, f"expected one run folder in {reports}, found {runs}"
    return runs[0]


@dataclass(frozen=True)
class Point:
    """Wanted medians of one configuration at one concurrency, and how noisy its rounds are."""

    config_id: str
    pp: int
    tp: int
    ep: int
    concurrency: int
    input_tps: float
    ttft_p50_s: float
    ttft_p95_s: float
    jitter: float = 0.003


# Seed report §7 medians (PP1/2/4/8/16 at C=8 and C=16) and §8 worst-rank peaks.
SEED_LAYOUTS = {
    "pp1-tp32-ep4": (1, 32, 4, 81_355),
    "pp2-tp16-ep4": (2, 16, 4, 80_335),
    "pp4-tp8-ep4": (4, 8, 4, 82_417),
    "pp8-tp4-ep4": (8, 4, 4, 79_407),
    "pp16-tp2-ep2": (16, 2, 2, 79_989),
}
SEED_MEDIANS = {
    8: {"pp1-tp32-ep4": (3257.96, 39.19, 41.62), "pp2-tp16-ep4": (5015.95, 25.22, 26.69),
        "pp4-tp8-ep4": (7155.20, 17.28, 18.62), "pp8-tp4-ep4": (8809.50, 13.47, 16.45),
        "pp16-tp2-ep2": (6701.04, 17.94, 21.39)},
    16: {"pp1-tp32-ep4": (3260.14, 78.39, 80.88), "pp2-tp16-ep4": (5018.38, 50.70, 52.14),
         "pp4-tp8-ep4": (7152.58, 34.84, 35.95), "pp8-tp4-ep4": (8824.12, 27.31, 29.77),
         "pp16-tp2-ep2": (6700.96, 35.88, 39.49)},
}


# PP1, the best layout (PP8) and PP16: the three layouts of the gate tests' runs.
SEED_TRIO = ("pp1-tp32-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2")

Medians = dict[int, dict[str, tuple[float, float, float]]]


def seed_points(configs: Iterable[str] | None = None, medians: Medians | None = None,
                **changes: tuple[float, float, float]) -> list[Point]:
    """The seed §7 medians as points: of ``configs`` only (default: all five layouts), with
    ``medians`` replacing the numbers, and ``changes`` mapping ``"<config>@<C>"`` to replaced
    medians of one point."""
    medians = {conc: dict(by_config) for conc, by_config in (medians or SEED_MEDIANS).items()}
    for key, values in changes.items():
        cid, conc = key.split("@")
        medians[int(conc)][cid] = values
    wanted = set(configs) if configs is not None else None
    return [Point(cid, *SEED_LAYOUTS[cid][:3], conc, *values)
            for conc, by_config in medians.items() for cid, values in by_config.items()
            if wanted is None or cid in wanted]


def seed_trio(**changes: tuple[float, float, float]) -> list[Point]:
    """The seed points of :data:`SEED_TRIO` (``changes`` as in :func:`seed_points`)."""
    return seed_points(SEED_TRIO, **changes)


def rounds(point: Point, repeats: int = 3, jitter: float | None = None, *,
           run_id: str = "synthetic", **overrides: Any) -> list[dict[str, Any]]:
    """``repeats`` results.csv rows whose medians are exactly the point's values (``jitter``
    replaces the point's own; ``overrides`` apply to every row)."""
    jitter = point.jitter if jitter is None else jitter
    offsets = [(i - (repeats - 1) / 2) * jitter for i in range(repeats)]
    if repeats % 2 == 0:  # an even count has no middle row: pair around the value instead
        offsets = [(-1 if i % 2 else 1) * jitter * (i // 2 + 1) for i in range(repeats)]
    rows = []
    for repeat, off in enumerate(offsets, start=1):
        tps = point.input_tps * (1 + off)
        row = {
            "run_id": run_id, "config_id": point.config_id, "pp": point.pp,
            "tp": point.tp, "ep": point.ep, "concurrency": point.concurrency,
            "repeat": repeat, "num_requests": NUM_REQUESTS, "completed": NUM_REQUESTS,
            "failed": 0, "duration_s": PROMPT_TOKENS / tps, "input_tokens": PROMPT_TOKENS,
            "input_tokens_nominal": PROMPT_TOKENS, "input_tps": tps, "input_tps_nominal": tps,
            "output_tokens": NUM_REQUESTS, "output_tokens_nominal": NUM_REQUESTS,
            "ttft_mean_s": point.ttft_p50_s * (1 - off),
            "ttft_p50_s": point.ttft_p50_s * (1 - off), "ttft_p95_s": point.ttft_p95_s * (1 - off),
            "ttft_p99_s": point.ttft_p95_s * 1.02 * (1 - off), "e2e_mean_s": point.ttft_p50_s,
            "e2e_p50_s": point.ttft_p50_s * (1 - off), "e2e_p99_s": point.ttft_p95_s * 1.03,
            "peak_concurrency": point.concurrency, "prompt_digest": "sha256:abc",
            "time_scale": 100.0, "simulated": True, "reused": False,
        }
        row.update(overrides)
        rows.append(row)
    return rows


def config_row(config_id: str, pp: int, tp: int, ep: int, order: int, peak_mib: float,
               **overrides: Any) -> dict[str, Any]:
    """One configs.csv row for a healthy configuration, with ``overrides`` applied."""
    row: dict[str, Any] = {
        "config_id": config_id, "pp": pp, "tp": tp, "ep": ep, "order": order, "boot_ok": True,
        "boot_s": 300.0 + 10 * order, "boot_error": "", "topology_ok": True,
        "pp_max_micro_batch_size": "", "log_clean": True, "log_findings": "",
        "mem_peak_mib": peak_mib, "mem_total_mib": GPU_TOTAL_MIB,
        "mem_headroom_mib": GPU_TOTAL_MIB - peak_mib, "mem_worst_node": "node1",
        "mem_worst_gpu": 3,
    }
    row.update(overrides)
    return row


def write_run(run_dir: Path, result_rows: list[dict[str, Any]],
              config_rows: list[dict[str, Any]], **meta: Any) -> Path:
    """Write a run folder; ``meta`` overrides run.json keys."""
    (run_dir / "metadata").mkdir(parents=True, exist_ok=True)
    for sub in ("service", "raw", "gpu"):
        (run_dir / sub).mkdir(exist_ok=True)
    columns = list(rounds(Point("x", 1, 1, 1, 1, 1.0, 1.0, 1.0), 1)[0])
    pd.DataFrame(result_rows, columns=columns).to_csv(run_dir / "results.csv", index=False)
    pd.DataFrame(config_rows).to_csv(run_dir / "configs.csv", index=False)
    manifest = {
        "run_id": run_dir.name, "baseline": config_rows[0]["config_id"] if config_rows else "",
        "order": [r["config_id"] for r in config_rows], "simulated": True,
        "cluster": "sim-4x8", "image": "local/sglang:test", "matrix": "test_matrix/x.toml",
        "time_scale": 100.0, "sglang_version": "0.5.0", "spread_threshold": 0.02,
        "min_repeats": 3,
    }
    manifest.update(meta)
    (run_dir / "metadata" / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    return run_dir


def seed_run(run_dir: Path, medians: Medians | None = None, **meta: Any) -> Path:
    """A run folder with the seed's five layouts, three repeats per point."""
    rows = [r for p in seed_points(medians=medians) for r in rounds(p)]
    configs = [config_row(cid, *spec[:3], order, spec[3])
               for order, (cid, spec) in enumerate(SEED_LAYOUTS.items())]
    return write_run(run_dir, rows, configs, **meta)


def record_run(root: Path, run_id: str, points: list[Point], *,
               failed_boot: tuple[str, ...] = (), rows: list[dict[str, Any]] | None = None) -> Path:
    """A run folder ``root/run_id`` recorded through the real RunStore: the points' rounds plus
    ``rows``, configs.csv (``failed_boot`` configurations failed at boot) and metadata/run.json."""
    store = RunStore(root, run_id)
    layouts = {p.config_id: (p.pp, p.tp, p.ep) for p in points}
    order = list(dict.fromkeys([*(p.config_id for p in points), *failed_boot]))
    for i, cid in enumerate(order):
        pp, tp, ep = layouts.get(cid) or SEED_LAYOUTS.get(cid, (1, 1, 1))[:3]
        ok = cid not in failed_boot
        store.update_config(cid, pp=pp, tp=tp, ep=ep, order=i, boot_ok=ok,
                            boot_error="" if ok else "rank 1 exited with status 1: CUDA OOM",
                            topology_ok=ok or None, log_clean=ok or None)
    for point in points:
        for row in rounds(point, run_id=run_id):
            store.append_result(row)
    for row in rows or []:
        store.append_result(row)
    store.write_json("metadata/run.json", {
        "run_id": run_id, "sweep": "kimi3-pp", "baseline": order[0], "order": order,
        "cluster": "local", "hosts": ["127.0.6.1"], "simulated": True, "time_scale": 100.0,
        "image": "local/sglang:test", "sglang_version": "0.5.0", "concurrencies": [8, 16],
    })
    return store.dir
