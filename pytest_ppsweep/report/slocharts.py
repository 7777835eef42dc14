"""The SLO searches charted: for each metric the SLO limits by a percentile (TTFT, TPOT, ITL,
E2E), the load of every probe (x: req/s, or C) against that metric's p50 and p99 (y), one line
per layout, and the SLO's limit drawn as a horizontal line.

What a reader sees: where each layout's latency crosses the target as the load rises, i.e. the
search's bracket, with the p99 above it. Points are the median over the rounds at one load (a
repeated final load is one point); filled: within the SLO, hollow: outside. Data from
``slo_probes.csv`` and the SLO of ``metadata/run.json``; inline SVG like every chart of the
report (report/charts.py), sized by ``viewBox`` so it reads at 800 px and 1280 px alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from html import escape

from pytest_ppsweep.folder.runfolder import FolderFiles, FolderSource, RunKey
from pytest_ppsweep.report.charts import PALETTE, XYPlot, nice_max
from pytest_ppsweep.results.sloanswer import number

__all__ = ["limits_by_metric", "search_svg", "section_html"]

# The percentiles slo_probes.csv keeps of each metric (run/slo_search.py PROBE_COLUMNS).
PERCENTILES = {"ttft": (50, 99), "tpot": (50, 99), "itl": (99,), "e2e": (50, 99)}
NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E latency"}
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 720, 360, 64, 176, 40, 52
LEGEND_ROWS = 12



def limits_by_metric(source: FolderSource) -> dict[str, list[tuple[int, float]]]:
    """The SLO's percentile limits, ``{metric: [(percentile, seconds), ...]}``, from the run's
    metadata/run.json; ``{"ttft": []}`` when it limits no percentile (per-request limits only:
    TTFT is still what the reader wants to see against the load)."""
    run = FolderFiles.of(source).meta
    slo = (run.get(RunKey.WORKLOAD) or {}).get("slo") or {}
    out: dict[str, list[tuple[int, float]]] = {}
    for lim in slo.get("limits", []):
        metric, pct, value = lim.get("metric"), lim.get("percentile"), number(lim.get("limit_s"))
        if metric in PERCENTILES and isinstance(pct, int) and value is not None:
            out.setdefault(metric, []).append((pct, value))
    return out or {"ttft": []}


def _series(probes: Sequence[Mapping[str, str]], metric: str
            ) -> dict[str, list[tuple[float, dict[int, float], bool]]]:
    """Per layout (and workload, when there are several): its loads in order, each with the
    median of every kept percentile over the rounds there and whether all were within."""
    workloads = {p.get("workload") for p in probes}
    by: dict[str, dict[float, list[Mapping[str, str]]]] = {}
    for p in probes:
        load = number(p.get("load"))
        if load is None:
            continue
        name = p["config_id"] + (f" [{p.get('workload')}]" if len(workloads) > 1 else "")
        by.setdefault(name, {}).setdefault(load, []).append(p)
    out: dict[str, list[tuple[float, dict[int, float], bool]]] = {}
    for name, loads in by.items():
        points = []
        for load in sorted(loads):
            rows = loads[load]
            values = {}
            for pct in PERCENTILES[metric]:
                got = [v for r in rows if (v := number(r.get(f"{metric}_p{pct}_s"))) is not None]
                if got:
                    values[pct] = statistics.median(got)
            if values:
                points.append((load, values, all(r.get("within") == "True" for r in rows)))
        if points:
            out[name] = points
    return out


def search_svg(probes: Sequence[Mapping[str, str]], metric: str,
               limits: Sequence[tuple[int, float]], unit: str) -> str:
    """One chart: ``metric``'s percentiles against the load of every probe in ``probes``."""
    series = _series(probes, metric)
    name = NAMES[metric]
    title = f"SLO search: {name} against the load"
    xs = [load for pts in series.values() for load, _v, _w in pts]
    ys = [v for pts in series.values() for _l, vals, _w in pts for v in vals.values()]
    ys += [limit for _p, limit in limits]
    plot = XYPlot(WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM,
                  nice_max(max(xs or [1.0]) * 1.05), nice_max(max(ys or [1.0]) * 1.08))
    X, Y, pw = plot.x, plot.y, plot.pw
    parts = [*plot.start("ppsweep-slo-search", title, f' data-metric="{metric}"'),
             *plot.grid("{:.3g} s"), plot.axis_names(f"load ({unit})", f"{name} (s)")]
    for i, (pct, limit) in enumerate(limits):
        y = Y(limit)
        right = i % 2 == 0  # two limits of one metric: labels at opposite ends
        parts.append(f'<line class="slo-line" x1="{LEFT}" x2="{LEFT + pw}" y1="{y:.1f}" '
                     f'y2="{y:.1f}" stroke="#b00" stroke-width="2" stroke-dasharray="6 4"/>'
                     f'<text class="slo-label" x="{LEFT + pw - 4 if right else LEFT + 4}" '
                     f'y="{y - 5:.1f}" text-anchor="{"end" if right else "start"}" fill="#b00">'
                     f"SLO: {escape(name)} p{pct} ≤ {limit:g} s</text>")
    color = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(series)}
    for n, pts in series.items():
        c = color[n]
        for pct in PERCENTILES[metric]:
            line = " ".join(f"{X(load):.1f},{Y(vals[pct]):.1f}" for load, vals, _w in pts
                            if pct in vals)
            if line:
                dash = "" if pct == 50 else ' stroke-dasharray="3 3"'
                parts.append(f'<polyline class="p{pct}" data-layout="{escape(n)}" '
                             f'points="{line}" fill="none" stroke="{c}" '
                             f'stroke-width="{2 if pct == 50 else 1.5}"{dash}/>')
        for load, vals, within in pts:
            pct = 50 if 50 in vals else max(vals)
            tip = escape(f"{n} at {load:g} {unit}: " + ", ".join(
                f"{name} p{p} {v:.3g} s" for p, v in sorted(vals.items()))
                + f", {'within' if within else 'outside'} the SLO")
            parts.append(f'<circle class="probe" cx="{X(load):.1f}" cy="{Y(vals[pct]):.1f}" '
                         f'r="4.5" fill="{c if within else "#fff"}" stroke="{c}" '
                         f'stroke-width="2"><title>{tip}</title></circle>')
    lx = LEFT + pw + 14
    names = list(series)[:LEGEND_ROWS]
    for i, n in enumerate(names):
        y = TOP + 6 + 17 * i
        label = n if len(n) <= 20 else n[:19] + "…"
        parts.append(f'<circle cx="{lx + 5}" cy="{y}" r="5" fill="{color[n]}"/>'
                     f'<text class="legend" x="{lx + 15}" y="{y + 4}">{escape(label)}'
                     f"<title>{escape(n)}</title></text>")
    y = TOP + 6 + 17 * len(names) + 10
    parts.append(f'<line x1="{lx}" x2="{lx + 12}" y1="{y}" y2="{y}" stroke="#555" '
                 f'stroke-width="2"/><text class="legend" x="{lx + 15}" y="{y + 4}">p50</text>'
                 f'<line x1="{lx}" x2="{lx + 12}" y1="{y + 17}" y2="{y + 17}" stroke="#555" '
                 f'stroke-width="1.5" stroke-dasharray="3 3"/><text class="legend" '
                 f'x="{lx + 15}" y="{y + 21}">p99</text>'
                 f'<circle cx="{lx + 5}" cy="{y + 34}" r="4.5" fill="#fff" stroke="#555" '
                 f'stroke-width="2"/><text class="legend" x="{lx + 15}" y="{y + 38}">outside '
                 "SLO</text>")
    return "".join(parts) + "</svg>"


def section_html(source: FolderSource) -> str:
    """The report's charts of the SLO searches ("" without a probe): one per metric the SLO
    limits by a percentile and per kind of load searched (rate, concurrency)."""
    files = FolderFiles.of(source)
    probes = files.probes
    if not probes:
        return ""
    charts = []
    for search in sorted({p.get("search") or "rate" for p in probes}):
        mine = [p for p in probes if (p.get("search") or "rate") == search]
        unit = "req/s" if search == "rate" else "C"
        for metric, limits in limits_by_metric(files).items():
            charts.append(search_svg(mine, metric, limits, unit))
    boxes = "".join(f'<div class="ppsweep-slo-search-box" style="max-width:100%;'
                    f'overflow-x:auto">{svg}</div>' for svg in charts)
    return ('<h3 id="ppsweep-slo-searches">The searches: latency against the load</h3>'
            f"{boxes}<p>Each layout's probes: the median over the rounds at each load (p50 "
            "solid, p99 dashed; filled: within the SLO, hollow: outside), the SLO's limit as "
            "the red line. slo_probes.csv has every round.</p>")
