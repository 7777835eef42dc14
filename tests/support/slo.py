"""A searched layout as the SLO search writes it (slo/<layout>.json and slo_probes.csv rows),
for the answer and gate tests."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path
from typing import Any

from pytest_ppsweep.results.slocapacity import of_probes, over_cell
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
    append_probes(run, cid, gpus, rows)




def append_probes(run: Path, cid: str, gpus: int, rows: list[dict[str, Any]]) -> None:
    """``rows`` appended to the run's slo_probes.csv (its header first when new), as probes of
    ``cid``'s rate search on ``gpus`` GPUs."""
    path = run / "slo_probes.csv"
    new = not path.exists()
    with path.open("a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=PROBE_COLUMNS)
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({"config_id": cid, "search": "rate", "gpus": gpus, **row})


def share_at(load: float, capacity: float, slope: float = 8.0) -> float:
    """A share of requests over the limit that crosses TTFT p50's allowance (0.5) at
    ``capacity``, logistic in log load."""
    return 1.0 / (1.0 + math.exp(-slope * math.log(load / capacity)))


def fitted(run: Path, cid: str, capacity: float, *, n: int = 200,
           spread: tuple[float, ...] = (0.8, 0.9, 1.0, 1.1, 1.25),
           bracket: tuple[float | None, float | None] | None = None,
           with_capacity: bool = True, tps: float = 1000.0, gpus: int = 32,
           rng: random.Random | None = None) -> dict[str, Any]:
    """One layout searched with the capacity estimate, as run/slo_search.py writes it: probes at
    ``capacity`` × ``spread``, each with ``n`` judged requests of which round(n × share) are
    over TTFT p50 ≤ 5 s (:func:`share_at`: the truth is ``capacity``; with ``rng``, drawn
    binomially instead), and the outcome with the
    capacity fitted from them (results/slocapacity.py). ``bracket``: (low, high) of the outcome
    (default: the highest probe load within, the lowest outside); ``with_capacity`` False: an
    outcome written before the capacity estimate (no ``capacity`` key) over the same probes.
    Returns the outcome."""
    loads = [round(capacity * f, 4) for f in spread]
    counts = [round(n * share_at(x, capacity)) if rng is None else
              sum(rng.random() < share_at(x, capacity) for _ in range(n)) for x in loads]
    within = [k / n <= 0.5 for k in counts]
    low, high = bracket if bracket is not None else (
        max((x for x, w in zip(loads, within, strict=True) if w), default=None),
        min((x for x, w in zip(loads, within, strict=True) if not w), default=None))
    rows = [{"probe": i + 1, "phase": "search", "load": x, "within": w, "workload": "default",
             "over_limit": over_cell({"ttft_p50_s": (k, n)}), "input_tps_per_gpu": tps,
             "goodput_rps": x, "num_requests": n, "reasons": "" if w else
             f"TTFT p50 ≤ 5 s: measured 6 s ({k} of {n} requests over 5 s)"}
            for i, (x, k, w) in enumerate(zip(loads, counts, within, strict=True))]
    cap = of_probes([{k: str(v) for k, v in r.items()} for r in rows], 0.95)
    text = f"≥ {low} req/s and < {high} req/s; " + (
        f"capacity {cap.text('req/s')}" if cap is not None else
        "no capacity estimate (too few probes near the crossing to fit it)")
    out: dict[str, Any] = {
        "config_id": cid, "gpus": gpus, "workload": "default", "slo": SLO, "unit": "req/s",
        "low": low, "high": high, "confirmed": True, "text": text, "status": "bracketed",
        "precision_pct": 10.0, "refines": 0, "max_refine": 16}
    if with_capacity:
        out["capacity"] = None if cap is None else {
            "point": cap.point, "low": cap.low, "high": cap.high, "confidence": cap.confidence,
            "probes": cap.probes, "dispersion": cap.dispersion,
            "half_width_pct": cap.half_width_pct}
    (run / "slo").mkdir(parents=True, exist_ok=True)
    (run / outcome_path(cid)).write_text(json.dumps(out), encoding="utf-8")
    append_probes(run, cid, gpus, rows)
    return out
