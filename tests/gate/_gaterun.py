"""Synthetic run folders for the gate tests, written with the real RunStore.

Each point gets ``repeats`` rounds spread symmetrically around the wanted median (offsets of
``jitter``), so the median is exactly the wanted value and the spread (max − min) / median is
``2 × jitter`` for three repeats.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ppsweep.measure.runstore import RunStore

NUM_REQUESTS = 40
PROMPT_TOKENS = 16_384 * NUM_REQUESTS
# Seed §7 medians at C=8 and C=16: (Input TPS, TTFT p50, TTFT p95).
LAYOUTS = {"pp1-tp32-ep4": (1, 32, 4), "pp8-tp4-ep4": (8, 4, 4), "pp16-tp2-ep2": (16, 2, 2)}
SEED = {
    ("pp1-tp32-ep4", 8): (3257.96, 39.19, 41.62), ("pp1-tp32-ep4", 16): (3260.14, 78.39, 80.88),
    ("pp8-tp4-ep4", 8): (8809.50, 13.47, 16.45), ("pp8-tp4-ep4", 16): (8824.12, 27.31, 29.77),
    ("pp16-tp2-ep2", 8): (6701.04, 17.94, 21.39), ("pp16-tp2-ep2", 16): (6700.96, 35.88, 39.49),
}


@dataclass(frozen=True)
class Point:
    """Wanted medians of one configuration × C, and how noisy its rounds are."""

    config_id: str
    concurrency: int
    input_tps: float
    ttft_p50_s: float
    ttft_p95_s: float
    jitter: float = 0.003


def seed_points(**changes: tuple[float, float, float]) -> list[Point]:
    """The seed medians; ``changes`` maps ``"<config>@<C>"`` to replaced medians."""
    values = dict(SEED)
    for key, medians in changes.items():
        cid, conc = key.split("@")
        values[(cid, int(conc))] = medians
    return [Point(cid, conc, *v) for (cid, conc), v in values.items()]


def rounds(point: Point, run_id: str, repeats: int = 3, **overrides: Any) -> list[dict[str, Any]]:
    """results.csv rows of one point; ``overrides`` apply to every row."""
    pp, tp, ep = LAYOUTS.get(point.config_id, (1, 1, 1))
    rows = []
    for repeat in range(1, repeats + 1):
        off = (repeat - (repeats + 1) / 2) * point.jitter
        tps = point.input_tps * (1 + off)
        row = {
            "run_id": run_id, "config_id": point.config_id, "pp": pp, "tp": tp, "ep": ep,
            "concurrency": point.concurrency, "repeat": repeat, "num_requests": NUM_REQUESTS,
            "completed": NUM_REQUESTS, "failed": 0, "duration_s": PROMPT_TOKENS / tps,
            "input_tokens": PROMPT_TOKENS, "input_tokens_nominal": PROMPT_TOKENS,
            "input_tps": tps, "input_tps_nominal": tps, "output_tokens": NUM_REQUESTS,
            "ttft_mean_s": point.ttft_p50_s * (1 - off), "ttft_p50_s": point.ttft_p50_s * (1 - off),
            "ttft_p95_s": point.ttft_p95_s * (1 - off), "ttft_p99_s": point.ttft_p95_s,
            "e2e_mean_s": point.ttft_p50_s, "e2e_p50_s": point.ttft_p50_s,
            "e2e_p99_s": point.ttft_p95_s, "peak_concurrency": point.concurrency,
            "prompt_digest": "sha256:abc", "time_scale": 100.0, "simulated": True,
            "reused": False,
        }
        row.update(overrides)
        rows.append(row)
    return rows


def write_run(root: Path, run_id: str, points: list[Point], *, failed_boot: tuple[str, ...] = (),
              rows: list[dict[str, Any]] | None = None) -> Path:
    """A run folder under ``root``: the points' rounds, configs.csv and metadata/run.json."""
    store = RunStore(root, run_id)
    order = list(dict.fromkeys([*(p.config_id for p in points), *failed_boot]))
    for i, cid in enumerate(order):
        pp, tp, ep = LAYOUTS.get(cid, (1, 1, 1))
        ok = cid not in failed_boot
        store.update_config(cid, pp=pp, tp=tp, ep=ep, order=i, boot_ok=ok,
                            boot_error="" if ok else "rank 1 exited with status 1: CUDA OOM",
                            topology_ok=ok or None, log_clean=ok or None)
    for point in points:
        for row in rounds(point, run_id):
            store.append_result(row)
    for row in rows or []:
        store.append_result(row)
    store.write_json("metadata/run.json", {
        "run_id": run_id, "sweep": "kimi3-pp", "baseline": order[0], "order": order,
        "cluster": "local", "hosts": ["127.0.6.1"], "simulated": True, "time_scale": 100.0,
        "image": "local/sglang:test", "sglang_version": "0.5.0", "concurrencies": [8, 16],
    })
    return store.dir
