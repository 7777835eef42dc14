"""The Pareto front of a run with an SLO: tokens/s per GPU against per-user speed, one point per
layout × load measured, the planner's predictions for layouts not booted, and ``pareto.csv``.

* x: per-user speed. Decode workloads (output_len > 1): output tokens/s of one request,
  1 / TPOT p50. Prefill (one output token): 1 / TTFT p50, requests per second one user sees.
* y: tokens/s per GPU (output tokens for decode, input tokens for prefill).
* Points: every closed-loop round of results.csv (median over repeats per layout × C) and every
  SLO probe of slo_probes.csv (median per layout × load), marked within / outside the SLO.
* The front: the measured points no other measured point beats on both axes.
* The SLO line: where the SLO's p50 limit on TTFT (prefill) or TPOT (decode) sits on x
  (x ≥ 1 / limit meets it).
* Predictions (planner/profile.json, ``python -m pytest_ppsweep fit``): for the cluster's
  layouts that were not booted, at the Cs measured, with 90 % intervals on both axes; drawn only
  when the fit reproduces its own training points (planner/trust.py, the one rule), else the
  chart says *misfit* and names them.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from pytest_ppsweep.folder.runfolder import PARETO_CSV as PARETO_CSV
from pytest_ppsweep.folder.runfolder import (
    PLANNER_PROFILE_JSON,
    FolderFiles,
    FolderSource,
    RunKey,
)
from pytest_ppsweep.planner.fitting import load_fitted
from pytest_ppsweep.planner.plan import cluster_layouts
from pytest_ppsweep.planner.trust import fit_trust
from pytest_ppsweep.report.charts import XYPlot, nice_max
from pytest_ppsweep.results.cost import per_million
from pytest_ppsweep.results.sloanswer import Distance, distances, number, over_text

__all__ = ["PARETO_CSV", "Point", "closest", "front", "pareto_svg", "points",
           "section_html", "terminal_lines", "write_pareto_csv"]  # fmt: skip

COLUMNS = ("config_id", "gpus", "source", "load", "x_tps_per_user", "x_lo", "x_hi",
           "y_tps_per_gpu", "y_lo", "y_hi", "within_slo", "on_front", "usd_per_m_tokens")


@dataclass(frozen=True)
class Point:
    """One point of the chart: measured (``round`` or ``probe``) or ``predicted``."""
    config_id: str
    gpus: int
    source: str  # "round" (closed loop), "probe" (SLO search) or "predicted"
    load: str  # "C=8", "0.4 req/s"
    x: float
    y: float
    within: bool | None = None  # None: no SLO to judge by
    x_lo: float | None = None
    x_hi: float | None = None
    y_lo: float | None = None
    y_hi: float | None = None
    usd_per_m: float | None = None

    @property
    def predicted(self) -> bool:
        return self.source == "predicted"



def _median(values: Sequence[float | None]) -> float | None:
    good = [v for v in values if v is not None]
    return statistics.median(good) if good else None


def _slo_limit(files: FolderFiles, decode: bool) -> float | None:
    """The SLO's p50 limit of the x metric (TPOT for decode, TTFT for prefill), seconds."""
    slo = (files.meta.get(RunKey.WORKLOAD) or {}).get("slo") or {}
    for lim in slo.get("limits", []):
        if lim.get("metric") == ("tpot" if decode else "ttft") and lim.get("percentile") == 50:
            return number(lim.get("limit_s"))
    return None


def _decode(files: FolderFiles) -> bool:
    return int((files.meta.get(RunKey.WORKLOAD) or {}).get("output_len") or 1) > 1


def points(folder: FolderSource) -> list[Point]:
    """Every measured point of the run folder (rounds and probes)."""
    files = FolderFiles.of(folder)
    decode = _decode(files)
    limit = _slo_limit(files, decode)
    x_key, y_key = ("tpot_p50_s", "output_tps") if decode else ("ttft_p50_s", "input_tps")
    out: list[Point] = []
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in files.rounds:
        if row.get("failed") not in ("0", "0.0") or not row.get("pp"):
            continue
        groups.setdefault((row["config_id"], f"C={row['concurrency']}"), []).append(row)
    probes: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in files.probes:
        unit = "req/s" if row["search"] == "rate" else "C"
        load = f"{number(row['load']) or 0:.3g} {unit}" if unit == "req/s" else f"C={row['load']}"
        probes.setdefault((row["config_id"], load), []).append(row)
    for source, table in (("round", groups), ("probe", probes)):
        for (cid, load), rows in table.items():
            gpus = int(float(rows[0].get("gpus") or int(rows[0]["pp"]) * int(rows[0]["tp"])))
            per_user = _median([1 / v if (v := number(r.get(x_key))) else None for r in rows])
            tps = _median([number(r.get(y_key)) for r in rows])
            if per_user is None or tps is None:
                continue
            within = None
            if source == "probe":
                within = all(r["within"] == "True" for r in rows)
            elif limit is not None:
                within = 1 / per_user <= limit
            cost = _median([number(r.get("usd_per_m_output" if decode else "usd_per_m_input"))
                            for r in rows])
            if cost is None:  # a closed round: priced from run.json's gpu_hour_usd
                cost = per_million(tps, gpus, number(files.meta.get(RunKey.GPU_HOUR_USD)))
            out.append(Point(cid, gpus, source, load, per_user, tps / gpus, within,
                             usd_per_m=cost))
    return out


def front(pts: Sequence[Point]) -> list[Point]:
    """The measured points that no other measured point beats on both axes (x and y higher)."""
    measured = [p for p in pts if not p.predicted]
    return [p for p in measured if not any(
        q.x >= p.x and q.y >= p.y and (q.x > p.x or q.y > p.y) for q in measured)]


def predictions(source: FolderSource, measured: Sequence[Point]
                ) -> tuple[list[Point], list[str]]:
    """The planner's points for the cluster's layouts not booted, at the Cs measured, and the
    misfit lines (non-empty: no predictions). ([], []) without a fitted profile."""
    files = FolderFiles.of(source)
    path = files.dir / PLANNER_PROFILE_JSON
    if not path.is_file() or _decode(files):  # the planner models prefill rounds
        return [], []

    try:
        profile = load_fitted(path)
        trust = fit_trust(path)
    except (OSError, ValueError, KeyError) as exc:
        return [], [f"planner/profile.json unreadable: {exc}"]
    if not trust.trusted:
        return [], [trust.summary(), *trust.misfits]
    gpus = {p.gpus for p in measured} or {int(profile.hardware.gpus)}
    booted = {(int(o["pp"]), int(o["tp"])) for o in profile.measured}
    booted |= {_pp_tp(p.config_id) for p in measured}
    concs = sorted({int(p.load[2:]) for p in measured if p.load.startswith("C=")}) or [8]
    out = []
    num_layers = int(getattr(profile.hardware, "num_layers", 61))
    # the workload's own prompts and request count, not the seeds' 16,384 × 40
    workload = (files.meta.get(RunKey.WORKLOAD)
                if isinstance(files.meta.get(RunKey.WORKLOAD), dict) else {})
    input_len = int((workload or {}).get("input_len") or 16384)
    num_requests = int((workload or {}).get("num_requests") or 40)
    for n in gpus:
        for pp, tp in dict.fromkeys((pp, tp) for pp, tp, _ in cluster_layouts(n, num_layers)):
            if (pp, tp) in booted:
                continue
            for c in concs:
                pr = profile.predict(pp, tp, c, input_len, num_requests)
                ttft, tps = pr.ttft_p50_s, pr.input_tps
                if not (ttft.value > 0 and tps.value > 0):
                    continue
                out.append(Point(f"pp{pp}-tp{tp}", n, "predicted", f"C={c}", 1 / ttft.value,
                                 tps.value / n, None, 1 / ttft.hi if ttft.hi > 0 else None,
                                 1 / ttft.lo if ttft.lo > 0 else None, tps.lo / n, tps.hi / n))
    return out, []


def _pp_tp(config_id: str) -> tuple[int, int]:
    parts = {p[:2]: p[2:] for p in config_id.split("-") if p[:2] in ("pp", "tp")}
    try:
        return int(parts.get("pp", "0")), int(parts.get("tp", "0"))
    except ValueError:
        return 0, 0


def write_pareto_csv(run_dir: Path, pts: Sequence[Point]) -> Path | None:
    """``pareto.csv``: every point, measured and predicted, with its front membership."""
    if not pts:
        return None
    on = set(map(id, front(pts)))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for p in pts:
        writer.writerow([p.config_id, p.gpus, p.source, p.load, f"{p.x:.6g}",
                         "" if p.x_lo is None else f"{p.x_lo:.6g}",
                         "" if p.x_hi is None else f"{p.x_hi:.6g}", f"{p.y:.6g}",
                         "" if p.y_lo is None else f"{p.y_lo:.6g}",
                         "" if p.y_hi is None else f"{p.y_hi:.6g}",
                         "" if p.within is None else p.within, id(p) in on,
                         "" if p.usd_per_m is None else f"{p.usd_per_m:.4g}"])
    path = Path(run_dir) / PARETO_CSV
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


_PAL = ("#3b6ea8", "#e07b39", "#4f9a5a", "#b04a5a", "#7d5ba6", "#8c6d46", "#2a9d9d", "#c0a020")


def pareto_svg(pts: Sequence[Point], *, decode: bool, limit: float | None, slo: str = "",
               width: int = 720) -> str:
    """The chart as inline SVG (``viewBox`` scales it to the page: the container sets its
    width, so it reads at 800 px and at 1280 px alike)."""
    height, left, right, top, bottom = 420, 70, 170, 36, 52
    xs = [v for p in pts for v in (p.x, p.x_lo, p.x_hi) if v is not None and v > 0]
    ys = [v for p in pts for v in (p.y, p.y_hi) if v is not None and v > 0]
    if limit:
        xs.append(1 / limit)
    plot = XYPlot(width, height, left, right, top, bottom,
                  nice_max(max(xs or [1.0]) * 1.04), nice_max(max(ys or [1.0]) * 1.04))
    X, Y, pw, ph = plot.x, plot.y, plot.pw, plot.ph
    x_name = "output tok/s per user (1/TPOT p50)" if decode else "1/TTFT p50 (1/s per user)"
    title = "Pareto front: tokens/s per GPU vs per-user speed"
    parts = [*plot.start("ppsweep-pareto", title), *plot.grid("{:,.0f}"),
             plot.axis_names(x_name, f"{'output' if decode else 'input'} tok/s per GPU")]
    if limit:
        lx = X(1 / limit)
        parts.append(f'<line class="slo-line" x1="{lx:.1f}" x2="{lx:.1f}" y1="{top}" '
                     f'y2="{top + ph}" stroke="#b00" stroke-width="2" stroke-dasharray="6 4"/>'
                     f'<text x="{lx + 4:.1f}" y="{top + 12}" fill="#b00">SLO {escape(slo)} →'
                     "</text>")
    fr = front(pts)
    if len(fr) > 1:
        path = " ".join(f"{X(p.x):.1f},{Y(p.y):.1f}" for p in sorted(fr, key=lambda p: p.x))
        parts.append(f'<polyline class="front" points="{path}" fill="none" stroke="#222" '
                     'stroke-width="2.5"/>')
    layouts = list(dict.fromkeys(p.config_id for p in pts))
    color = {cid: _PAL[i % len(_PAL)] for i, cid in enumerate(layouts)}
    on = set(map(id, fr))
    for p in pts:
        c = color[p.config_id]
        tip = escape(f"{p.config_id} {p.load} ({p.source}): {p.x:.3g} per user, "
                     f"{p.y:,.0f} tok/s/GPU" + ("" if p.within is None else
                                                 f", {'within' if p.within else 'outside'} SLO"))
        if p.predicted:
            if p.x_lo is not None and p.x_hi is not None:
                parts.append(f'<line x1="{X(p.x_lo):.1f}" x2="{X(p.x_hi):.1f}" '
                             f'y1="{Y(p.y):.1f}" y2="{Y(p.y):.1f}" stroke="{c}" opacity="0.6"/>')
            if p.y_lo is not None and p.y_hi is not None:
                parts.append(f'<line x1="{X(p.x):.1f}" x2="{X(p.x):.1f}" y1="{Y(p.y_lo):.1f}" '
                             f'y2="{Y(p.y_hi):.1f}" stroke="{c}" opacity="0.6"/>')
            parts.append(f'<rect class="predicted" x="{X(p.x) - 5:.1f}" y="{Y(p.y) - 5:.1f}" '
                         f'width="10" height="10" fill="#fff" stroke="{c}" stroke-width="2" '
                         f'stroke-dasharray="2 2"><title>{tip} [90 % interval]</title></rect>')
            continue
        r = 7 if id(p) in on else 5
        fill = c if p.within is not False else "#fff"
        parts.append(f'<circle class="measured{" on-front" if id(p) in on else ""}" '
                     f'cx="{X(p.x):.1f}" cy="{Y(p.y):.1f}" r="{r}" fill="{fill}" stroke="{c}" '
                     f'stroke-width="2"><title>{tip}</title></circle>')
    lx = left + pw + 14
    for i, cid in enumerate(layouts[:14]):
        y = top + 6 + 17 * i
        parts.append(f'<circle cx="{lx + 5}" cy="{y}" r="5" fill="{color[cid]}"/>'
                     f'<text x="{lx + 15}" y="{y + 4}">{escape(cid)}</text>')
    y = top + 6 + 17 * min(len(layouts), 14) + 10
    parts.append(f'<circle cx="{lx + 5}" cy="{y}" r="5" fill="#fff" stroke="#555" '
                 f'stroke-width="2"/><text x="{lx + 15}" y="{y + 4}">outside SLO</text>'
                 f'<rect x="{lx}" y="{y + 12}" width="10" height="10" fill="#fff" stroke="#555" '
                 f'stroke-dasharray="2 2" stroke-width="2"/><text x="{lx + 15}" y="{y + 21}">'
                 'predicted (90 %)</text>'
                 f'<line x1="{lx}" x2="{lx + 12}" y1="{y + 36}" y2="{y + 36}" stroke="#222" '
                 f'stroke-width="2.5"/><text x="{lx + 15}" y="{y + 40}">front</text>')
    return "".join(parts) + "</svg>"


def chart_data(source: FolderSource
               ) -> tuple[list[Point], list[str], bool, float | None, str]:
    """(points measured and predicted, misfit lines, decode?, SLO x limit, SLO text)."""
    files = FolderFiles.of(source)
    measured = points(files)
    predicted, misfit = predictions(files, measured) if measured else ([], [])
    decode = _decode(files)
    outcomes = files.outcomes
    slo = str(outcomes[0].get("slo")) if outcomes else ""
    return [*measured, *predicted], misfit, decode, _slo_limit(files, decode), slo


def section_html(source: FolderSource) -> str:
    """The report's Pareto section ("" when the run has no SLO search)."""
    files = FolderFiles.of(source)
    if not files.outcomes:
        return ""
    pts, misfit, decode, limit, slo = chart_data(files)
    write_pareto_csv(files.dir, pts)
    note = ("<p class='ppsweep-misfit'><b>Planner misfit:</b> the fitted profile does not "
            "reproduce its own training points, so no prediction is drawn: "
            + escape("; ".join(misfit)) + "</p>") if misfit else ""
    preds = sum(p.predicted for p in pts)
    caption = (f"One point per layout × load measured ({len(pts) - preds}); filled: within the "
               f"SLO, hollow: outside; the black line is the front"
               + (f"; {preds} dashed squares are the planner's predictions for layouts not "
                  "booted, with 90 % intervals" if preds else "") + ". pareto.csv has them all.")
    chart = (f'<div class="ppsweep-pareto-box" style="max-width:100%;overflow-x:auto">'
             f"{pareto_svg(pts, decode=decode, limit=limit, slo=slo)}</div>"
             f"<p>{escape(caption)}</p>{note}")
    if any(p.within for p in pts if not p.predicted):
        return f'<h3 id="ppsweep-pareto">Pareto front within the SLO</h3>{chart}'
    # No measured point meets the SLO: there is no front within it. What is worth reading is
    # how close each layout came; the chart of every point (all outside) comes after.
    near = closest(files)
    rows = "".join(f'<tr><td class="l">{escape(d.layout)}</td><td>{escape(d.load)}</td>'
                   f'<td class="l">{escape(d.limit)}</td><td>{d.measured_s:.3g} s</td>'
                   f'<td>{escape(over_text(d.measured_s, d.limit_s))}</td></tr>' for d in near)
    table = ('<table class="ppsweep-closest"><thead><tr><th class="l">layout</th>'
             '<th>lowest load</th><th class="l">limit</th><th>measured</th>'
             f"<th>distance to the limit</th></tr></thead><tbody>{rows}</tbody></table>"
             if rows else "<p>No probe says by how much its limit was missed.</p>")
    return (f'<h3 id="ppsweep-closest">No point within {escape(slo or "the SLO")}: the closest '
            f"points</h3>{table}"
            '<h4 id="ppsweep-pareto">Every measured point (none within the SLO)</h4>' + chart)


def closest(source: FolderSource) -> list[Distance]:
    """How close each searched layout came to the SLO at its lowest load, closest first
    (results/sloanswer.distances)."""
    files = FolderFiles.of(source)
    ids = list(dict.fromkeys(str(o.get("config_id")) for o in files.outcomes))
    return distances(files.probes, ids)


def terminal_lines(source: FolderSource) -> list[str]:
    """The front in a few terminal lines ([] without an SLO search)."""
    files = FolderFiles.of(source)
    if not files.outcomes:
        return []
    pts, misfit, decode, _limit, slo = chart_data(files)
    lines = []
    if not any(p.within for p in pts if not p.predicted):
        lines.append(f"No point within {slo or 'the SLO'}; the closest, by layout:")
        lines += [f"  {d.text}" for d in closest(files)]
    lines.append("Pareto front (tok/s per GPU vs " + ("1/TPOT" if decode else "1/TTFT") + ")"
                 + (", every point outside the SLO" if len(lines) else "") + ":")
    for p in sorted(front(pts), key=lambda p: p.x):
        lines.append(f"  {p.config_id} {p.load}: {p.y:,.0f} tok/s/GPU at {p.x:.3g}/s per user"
                     + ("" if p.usd_per_m is None else f", ${p.usd_per_m:,.3g}/M tok"))
    if misfit:
        lines.append("  planner misfit, no predictions: " + "; ".join(misfit))
    return lines
