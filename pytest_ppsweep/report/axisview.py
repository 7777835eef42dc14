"""The report's axis sweep: one table per workload and axis, grouped by layout, the axis values
as columns with each variant's worst-rank memory headroom (the A2A smoke question, "does DeepEP
fit on PP4's worst rank?", on the first screen), a chart per axis, and the comparisons with
the fields their two points differ in, confounded ones marked."""

from __future__ import annotations

import json
import math
from html import escape
from typing import Any

import pandas as pd

from pytest_ppsweep.folder.runfolder import RunJsonDict
from pytest_ppsweep.report.charts import bar_chart
from pytest_ppsweep.report.format import delta, num, records
from pytest_ppsweep.results.confound import axis_table, confounded_lines

__all__ = ["axis_sweep_html", "comparisons_html", "confounded_text"]

_STYLE = """<style>
.ppsweep-axes .confounded{background:#fde8c8}.ppsweep-axes .nofit{background:#f8d0d0}
.ppsweep-axes .mark{font-weight:bold;color:#a50}.ppsweep-axes .kind{color:#666;font-size:90%}
.ppsweep-comparisons td{overflow-wrap:anywhere}.ppsweep-axes .n{white-space:nowrap}
.ppsweep-axes td.n{overflow-wrap:normal;text-align:right}
</style>"""


def _headline(workload_rows: list[dict[str, Any]]) -> tuple[str, str, str]:
    """The metric a workload is read by: output TPS for a decode workload that has it, else
    Input TPS; its label and unit."""
    for row in workload_rows:
        for cell in row["cells"].values():
            for r in cell["metrics"].values():
                # a prefill round (output_len 1) has no TPOT: NaN in the table, not None
                if _finite(r.get("output_tps")) and _finite(r.get("tpot_p50_s")):
                    return "output_tps", "Output TPS", "tokens/s"
    return "input_tps", "Input TPS", "tokens/s"


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value)


def _shown(value: str) -> str:
    try:
        loaded = json.loads(value)
    except (TypeError, ValueError):
        return value
    return "unset" if loaded is None else str(loaded)


def axis_sweep_html(meta: RunJsonDict, table: pd.DataFrame, configs: pd.DataFrame) -> str:
    """The axis tables and charts ("" for a sweep without axes); ``meta``: the run's run.json
    as read (its ``points`` and ``axes``)."""
    sections = axis_table(table, configs, meta)
    if not sections:
        return ""
    parts = [_STYLE, '<div class="ppsweep-axes"><h3>Axis sweep</h3>']
    charts = []
    for sec in sections:
        metric, label, unit = _headline(sec["rows"])
        concs = sorted({c for row in sec["rows"] for cell in row["cells"].values()
                        for c in cell["metrics"]})
        values = sec["values"]
        headers = ["Layout"] + [escape(f"{sec['axis']} = {_shown(v)}") for v in values]
        rows, classes = [], []
        for row in sec["rows"]:
            cells = [escape(row["layout"])]
            tight = False
            for v in values:
                cell = row["cells"].get(v)
                if cell is None:
                    cells.append("—")
                    continue
                # each number in a span that never wraps (C=16 read as "1 / 6" at 1280 px)
                per_c = "<br>".join(
                    f'<span class="n">C={c}:</span> '
                    f'<span class="n">{num(cell["metrics"][c].get(metric))}</span>'
                    + (f', TTFT p50 <span class="n">'
                       f"{num(cell['metrics'][c].get('ttft_p50_s'), 2, ' s')}</span>"
                       if metric == "input_tps" else
                       f', TPOT p50 <span class="n">'
                       f"{num(cell['metrics'][c].get('tpot_p50_s'), 4, ' s')}</span>")
                    for c in concs if c in cell["metrics"])
                headroom = cell.get("headroom_mib")
                room = ("headroom n/a" if headroom is None or (isinstance(headroom, float)
                                                               and math.isnan(headroom))
                        else f'headroom <span class="n">{num(headroom, 0, " MiB")}</span>')
                if cell.get("boot_error"):
                    room = f"did not boot: {escape(cell['boot_error'][:160])}"
                    tight = True
                runs = f" (runs {escape(cell['runs'])})" if cell.get("runs") and cell[
                    "runs"] not in cell["config_id"] else ""
                cells.append(f"{escape(cell['config_id'])}{runs}<br><b>{room}</b>"
                             + (f"<br>{per_c}" if per_c else "<br>no rounds"))
            rows.append(cells)
            classes.append("nofit" if tight else "")
        title = f"{label} and worst-rank memory headroom by {escape(sec['axis'])}" + (
            f" — workload {escape(sec['workload'])}" if sec["workload"] else "")
        parts.append(f"<h4>{title}</h4>" + _table(headers, rows, classes))
        first = concs[0] if concs else None
        series = []
        for v in values:
            col = []
            for row in sec["rows"]:
                cell = row["cells"].get(v)
                value = cell["metrics"].get(first, {}).get(metric) if cell and first else None
                col.append(float(value) if isinstance(value, (int, float)) else math.nan)
            series.append((f"{sec['axis']}={_shown(v)}", col))
        charts.append(bar_chart(f"{label} at C={first} by {sec['axis']}"
                                + (f" ({sec['workload']})" if sec["workload"] else ""),
                                [r["layout"] for r in sec["rows"]], series, unit))
    parts.append('<div class="charts">' + "".join(charts) + "</div></div>")
    return "".join(parts)


def _table(headers: list[str], rows: list[list[str]], classes: list[str] | None = None,
           numeric: range | tuple[int, ...] = ()) -> str:
    """Cells are text that may wrap anywhere (no sideways scroll at 800 px), except the
    ``numeric`` columns: a number never wraps."""
    head = "".join(f'<th class="l">{h}</th>' for h in headers)
    body = "".join(
        f'<tr class="{(classes or [""] * len(rows))[i]}">'
        + "".join(f'<td class="{"n" if j in numeric else "l"}">{c}</td>'
                  for j, c in enumerate(row)) + "</tr>"
        for i, row in enumerate(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# The deltas a comparison shows: the prefill headline, and a decode workload's when it has them
# (the rest stay in comparisons.csv); at 800 px the table must not scroll sideways.
COMPARISON_METRICS = ("input_tps", "ttft_p50_s", "output_tps", "tpot_p50_s")


def comparisons_html(frame: pd.DataFrame | None) -> str:
    """Every comparison with its headline deltas, the fields in which its two points differ and
    a CONFOUNDED mark naming the extra fields."""
    if frame is None or frame.empty:
        return ""
    shown = [m for m in COMPARISON_METRICS if f"{m}_delta_pct" in frame.columns
             and frame[f"{m}_delta_pct"].notna().any()]
    headers = ["Comparison", "C", *[f"Δ {m.removesuffix('_s')}" for m in shown],
               "Differs in", "Single variable?"]
    rows, classes = [], []
    for r in records(frame):
        conf = bool(r.get("confounded"))
        kind = " · ".join(escape(str(x)) for x in (r["kind"], r.get("workload")) if x)
        rows.append([f"{escape(str(r['reference']))} → {escape(str(r['config_id']))}"
                     f'<br><span class="kind">{kind}</span>', str(r["concurrency"]),
                     *[delta(r.get(f"{m}_delta_pct")) for m in shown],
                     escape(str(r.get("differs") or "")).replace("; ", ";<br>"),
                     (f'<span class="mark">CONFOUNDED</span>: also {escape(str(r["extra"]))}'
                      if conf else f"yes ({escape(str(r['studied']))})")])
        classes.append("confounded" if conf else "")
    return (_STYLE + '<div class="ppsweep-axes ppsweep-comparisons"><h3>Comparisons: what '
            "differs between the two points of each delta</h3>"
            + _table(headers, rows, classes, numeric=range(1, 2 + len(shown)))
            + "</div>")


def confounded_text(frame: pd.DataFrame | None) -> list[str]:
    """The terminal's lines for confounded comparisons."""
    return [] if frame is None else confounded_lines(frame)
