"""Predictions for every layout a cluster can run (PP x TP = its GPUs, every EP that divides TP)
and every workload asked, with their 90 % intervals, next to what was measured where both exist.

A value is never shown without its interval. EP does not enter the cost model (the emulator's
neither): layouts that differ only in EP get the same prediction, and the note says so.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ppsweep.planner.data import PlannerError
from pytest_ppsweep.planner.fitting import Band, Fitted, Prediction

__all__ = [
    "PlanRow",
    "WorkloadSpec",
    "cluster_layouts",
    "parse_workload",
    "plan_html",
    "plan_lines",
    "plan_rows",
    "write_plan_csv",
]

EP_NOTE = "EP does not enter the model"


@dataclass(frozen=True)
class WorkloadSpec:
    concurrency: int
    input_len: int
    num_requests: int


@dataclass(frozen=True)
class PlanRow:
    layout: str
    pp: int
    tp: int
    ep: int
    workload: WorkloadSpec
    prediction: Prediction
    measured: dict[str, Any] | None
    state: str  # measured | predicted, not measured | unidentified: …
    note: str = ""


def parse_workload(text: str) -> WorkloadSpec:
    """``c=1,input=32768,requests=40`` (any order; input and requests default to 16384/40)."""
    fields: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ("c", "input", "requests"):
            raise PlannerError(f"--workload {text!r}: key {key!r}: expected c=N, input=N or "
                               f"requests=N, found {part!r}")
        try:
            fields[key] = int(value)
        except ValueError:
            raise PlannerError(f"--workload {text!r}: key {key!r}: expected an integer, found "
                               f"{value!r}") from None
        if fields[key] < 1:
            raise PlannerError(f"--workload {text!r}: key {key!r}: expected >= 1, found "
                               f"{fields[key]}")
    if "c" not in fields:
        raise PlannerError(f"--workload {text!r}: key 'c': expected the concurrency, found none")
    return WorkloadSpec(fields["c"], fields.get("input", 16384), fields.get("requests", 40))


def cluster_layouts(gpus: int, num_layers: int) -> list[tuple[int, int, int]]:
    """(pp, tp, ep) with pp x tp = gpus, pp <= layers, and every ep dividing tp."""
    out: list[tuple[int, int, int]] = []
    for pp in range(1, gpus + 1):
        if gpus % pp or pp > num_layers:
            continue
        tp = gpus // pp
        out.extend((pp, tp, ep) for ep in range(1, tp + 1) if tp % ep == 0)
    return out


def default_workloads(fitted: Fitted) -> list[WorkloadSpec]:
    seen = sorted({(o["concurrency"], o["input_len"], o["num_requests"])
                   for o in fitted.measured})
    return [WorkloadSpec(*w) for w in seen] or [WorkloadSpec(8, 16384, 40)]


def plan_rows(fitted: Fitted, workloads: Sequence[WorkloadSpec] = (),
              layouts: Sequence[tuple[str, int, int, int]] | None = None) -> list[PlanRow]:
    """One row per layout x workload. ``layouts``: (id, pp, tp, ep), default every layout of
    the cluster (ids ``pp{P}-tp{T}-ep{E}`` made here, measured points matched by numbers)."""
    hw = fitted.hardware
    chosen = list(layouts) if layouts is not None else [
        (f"pp{pp}-tp{tp}-ep{ep}", pp, tp, ep) for pp, tp, ep in cluster_layouts(hw.gpus,
                                                                              hw.num_layers)]
    measured_eps = {o["ep"] for o in fitted.measured}
    rows: list[PlanRow] = []
    cache: dict[tuple[int, int, int, int, int], Prediction] = {}
    for wl in workloads or default_workloads(fitted):
        for cid, pp, tp, ep in chosen:
            key = (pp, tp, wl.concurrency, wl.input_len, wl.num_requests)
            if key not in cache:
                cache[key] = fitted.predict(pp, tp, wl.concurrency, wl.input_len,
                                            wl.num_requests)
            pred = cache[key]
            meas = next((o for o in fitted.measured
                         if (o["pp"], o["tp"], o["ep"], o["concurrency"], o["input_len"])
                         == (pp, tp, ep, wl.concurrency, wl.input_len)), None)
            state = ("measured" if meas else pred.status if pred.status != "predicted"
                     else "predicted, not measured")
            note = "" if ep in measured_eps else EP_NOTE
            rows.append(PlanRow(cid, pp, tp, ep, wl, pred, meas, state, note))
    return rows


def _band(b: Band, fmt: str) -> str:
    return f"{b.value:{fmt}} [{b.lo:{fmt}}, {b.hi:{fmt}}]"


def _err(pred: Band, meas: dict[str, Any] | None, key: str) -> str:
    if not meas:
        return ""
    inside = "in" if pred.contains(float(meas[key])) else "OUT"
    return f"{float(meas[key]):,.2f} ({pred.value / float(meas[key]) - 1:+.1%}, {inside})"


HEADERS = ("layout", "C", "input", "Input TPS [90 %]", "TTFT p50 s [90 %]", "TTFT p95 s [90 %]",
           "worst-rank MiB [90 %]", "boot s [90 %]", "measured TPS (err)", "measured TTFT p50",
           "state")


def _cells(r: PlanRow) -> list[str]:
    p = r.prediction
    return [r.layout, str(r.workload.concurrency), str(r.workload.input_len),
            _band(p.input_tps, ",.0f"), _band(p.ttft_p50_s, ".2f"), _band(p.ttft_p95_s, ".2f"),
            _band(p.mem_peak_mib, ",.0f"), _band(p.boot_s, ",.0f"),
            _err(p.input_tps, r.measured, "input_tps"), _err(p.ttft_p50_s, r.measured,
                                                             "ttft_p50_s"),
            r.state + (f" ({r.note})" if r.note else "")]


COMPACT = (0, 1, 2, 3, 4, 8, 10)  # the columns of HEADERS a 100-column table shows


def ranked(rows: Sequence[PlanRow]) -> list[tuple[int, PlanRow]]:
    """``rows`` with their rank within their workload, best predicted Input TPS first (the
    workloads in their order)."""
    out: list[tuple[int, PlanRow]] = []
    for wl in dict.fromkeys(r.workload for r in rows):
        mine = sorted((r for r in rows if r.workload == wl),
                      key=lambda r: -r.prediction.input_tps.value)
        out += [(i, r) for i, r in enumerate(mine, 1)]
    return out


def plan_lines(rows: Sequence[PlanRow], width: int | None = None) -> list[str]:
    """The table for a terminal, ranked by predicted Input TPS within each workload (``#``).
    With ``width``, the main columns (:data:`COMPACT`), each line at most ``width`` wide;
    without, every column."""
    cols = list(range(len(HEADERS))) if width is None else list(COMPACT)
    if width is not None and not any(r.measured for r in rows):
        cols.remove(8)  # nothing measured: no column of blanks
    table = [["#", *(HEADERS[i] for i in cols)],
             *([str(n), *(c for i, c in enumerate(_cells(r)) if i in cols)]
               for n, r in ranked(rows))]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    lines = ["  ".join(c.rjust(w) if i == 0 else c.ljust(w)
                       for i, (c, w) in enumerate(zip(row[:-1], widths, strict=True)))
             + "  " + row[-1] for row in table]
    if width is not None:
        lines = [line if len(line) <= width else line[:width - 1] + "…" for line in lines]
    return lines


def plan_html(rows: Sequence[PlanRow], title: str = "Planner: predicted vs measured") -> str:
    """The report section: every prediction with its interval, measured values beside."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(r)) + "</tr>"
                   for r in rows)
    return (f'<h2 id="ppsweep-planner">{html.escape(title)}</h2><table class="ppsweep-planner">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def write_plan_csv(path: Path, rows: Sequence[PlanRow]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["layout", "pp", "tp", "ep", "concurrency", "input_len", "num_requests",
                *(f"{m}_{k}" for m in ("input_tps", "ttft_p50_s", "ttft_p95_s", "mem_peak_mib",
                                       "boot_s") for k in ("pred", "lo90", "hi90")),
                "measured_input_tps", "measured_ttft_p50_s", "state", "note"])
    for r in rows:
        p = r.prediction
        bands = [p.input_tps, p.ttft_p50_s, p.ttft_p95_s, p.mem_peak_mib, p.boot_s]
        w.writerow([r.layout, r.pp, r.tp, r.ep, r.workload.concurrency, r.workload.input_len,
                    r.workload.num_requests, *(f"{x:.6g}" for b in bands
                                               for x in (b.value, b.lo, b.hi)),
                    r.measured["input_tps"] if r.measured else "",
                    r.measured["ttft_p50_s"] if r.measured else "", r.state, r.note])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def parameter_lines(fitted: Fitted) -> list[str]:
    """Every fitted parameter with its 90 % interval, and which ones the data cannot identify."""
    out = []
    for p in fitted.parameters():
        lo, hi = p["ci90"]
        flag = "" if p["identified"] else f"  NOT IDENTIFIED: {p['reason']}"
        if p.get("prior_measured"):
            flag += f"  (prior measured: {p['prior_measured']})"
        out.append(f"  {p['name']:<22} {p['value']:>10.4g} {p['unit']:<6} [{lo:.4g}, {hi:.4g}]"
                   f"{flag}")
    noise = ", ".join(f"{k} {v:.1%}" for k, v in fitted.noise.items())
    out.append(f"  model + measurement noise (log sd): {noise}")
    return out
