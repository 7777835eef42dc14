"""A searched layout as the SLO search writes it (slo/<layout>.json and slo_probes.csv rows),
for the answer and gate tests."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pytest_ppsweep.run.slo_search import PROBE_COLUMNS, outcome_path

SLO = "TTFT p50 ≤ 5 s"


def searched(run: Path, cid: str, low: float | None, high: float | None, *,
           tps: tuple[float, ...] = (1000.0, 1010.0, 990.0), gpus: int = 32,
           confirmed: bool = True, reason: str = "") -> None:
    """One searched layout: its outcome and its probes (the final load's repeats at ``low``,
    one probe outside at ``high``)."""
    text = (f"≥ {low} req/s and < {high} req/s" if low is not None and high is not None
            else f"≥ {low} req/s (the maximum searched)" if low is not None else "< 0.5 req/s")
    out = {"config_id": cid, "gpus": gpus, "workload": "default", "slo": SLO, "unit": "req/s",
           "low": low, "high": high, "confirmed": confirmed, "text": text,
           "status": "bracketed" if high and low else "at least max" if low else "below min"}
    (run / "slo").mkdir(parents=True, exist_ok=True)
    (run / outcome_path(cid)).write_text(json.dumps(out), encoding="utf-8")
    rows: list[dict[str, Any]] = []
    if low is not None:
        rows += [{"load": low, "within": True, "input_tps_per_gpu": v, "goodput_rps": v / 1000,
                  "ttft_p50_s": 4.0, "input_tps": v * gpus,
                  "usd_per_m_input": 2.0 * gpus / 3600 / (v * gpus) * 1e6} for v in tps]
    if high is not None and low is not None:
        rows.append({"load": high, "within": False, "reasons": "TTFT p50 ≤ 5 s: measured 6 s",
                     "ttft_p50_s": 6.0, "input_tps": 1100.0 * gpus})
    if low is None:
        rows.append({"load": 0.5, "within": False, "reasons": reason})
    path = run / "slo_probes.csv"
    new = not path.exists()
    with path.open("a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=PROBE_COLUMNS)
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({"config_id": cid, "search": "rate", "gpus": gpus, **row})


