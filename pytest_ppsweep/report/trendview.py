"""The report's "History" section: each point's metric across the sweep's runs (images and
dates), from the reports folder's run history (gate/history.py), with the point's interval as
an error bar; inline SVG like every chart of the report (report/charts.py).

One chart per point of this run (layout × C) that the history holds in at least two runs: x is
the run (oldest first; labelled with the image's tag and the date), y the median of the valid
repeats, the bar the point's own interval of its geometric mean. This run's value is drawn
filled and larger; a run whose image computed wrong outputs (or failed the gate on them) is
red, its tip says why. Nothing is drawn without a history (a run folder outside a reports folder, a
first run of its sweep).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from pytest_ppsweep.gate.comparison import METRICS
from pytest_ppsweep.gate.history import History, HistoryError, TrendRow, image_label
from pytest_ppsweep.report.charts import PALETTE, XYPlot, nice_max

__all__ = ["html_section", "trend_svg"]

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 720, 300, 72, 24, 40, 72
TREND_METRIC = "input_tps"
MAX_CHARTS = 8
WRONG_COLOR = "#c0392b"  # a run whose outputs or gate failed (TrendRow.wrong)


def trend_svg(rows: Sequence[TrendRow], metric: str, current_run: str = "") -> str:
    """One point's ``metric`` across runs: a line through the medians, an error bar per
    interval, the run ``current_run`` marked."""
    label, unit = METRICS[metric][1], METRICS[metric][2].strip()
    first = rows[0]
    title = f"{first.config_id} C={first.concurrency}: {label} across images"
    tops = [r.high if r.high is not None else r.median for r in rows]
    n = len(rows)
    plot = XYPlot(WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM, float(max(n - 1, 1)),
                  nice_max(max(tops) * 1.08))
    y_name = f"{label} ({unit})" if unit else label
    parts = [*plot.start("ppsweep-trend", title,
                         f' data-point="{escape(first.config_id)}-c{first.concurrency}" '
                         f'data-metric="{metric}"'),
             plot.axis_names("", y_name)]
    # y grid only: x is the run's order, labelled below each run
    for i in range(5):
        gy = plot.y_max * i / 4
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot.pw}" y1="{plot.y(gy):.1f}" '
                     f'y2="{plot.y(gy):.1f}" stroke="#e4e4e4"/><text x="{LEFT - 5}" '
                     f'y="{plot.y(gy) + 4:.1f}" text-anchor="end">{gy:,.4g}</text>')

    def x_of(i: int) -> float:
        return plot.x(i) if n > 1 else LEFT + plot.pw / 2

    color = PALETTE[0]
    path = " ".join(f"{'M' if i == 0 else 'L'}{x_of(i):.1f},{plot.y(r.median):.1f}"
                    for i, r in enumerate(rows))
    parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
    for i, r in enumerate(rows):
        x = x_of(i)
        if r.low is not None and r.high is not None:
            parts.append(f'<line class="interval" x1="{x:.1f}" x2="{x:.1f}" '
                         f'y1="{plot.y(r.low):.1f}" y2="{plot.y(r.high):.1f}" stroke="{color}"/>'
                         f'<line x1="{x - 4:.1f}" x2="{x + 4:.1f}" y1="{plot.y(r.low):.1f}" '
                         f'y2="{plot.y(r.low):.1f}" stroke="{color}"/><line x1="{x - 4:.1f}" '
                         f'x2="{x + 4:.1f}" y1="{plot.y(r.high):.1f}" y2="{plot.y(r.high):.1f}" '
                         f'stroke="{color}"/>')
        mine = r.run_id == current_run
        interval = ("" if r.low is None or r.high is None
                    else f" [{r.low:,.4g}, {r.high:,.4g}]")
        wrong = f" WRONG: {r.wrong}" if r.wrong else ""
        named = image_label(r.image)  # the label under the point, then the whole image
        whole = f" ({r.image})" if r.image and r.image != named else ""
        tip = escape(f"{named}{whole} {r.started} ({r.run_id}): {r.median:,.4g}{interval}"
                     f"{wrong}")
        # a run whose image computed wrong outputs is red: its speed is no image's to compare
        edge = WRONG_COLOR if wrong else color
        parts.append(f'<circle class="run{" current" if mine else ""}{" wrong" if wrong else ""}"'
                     f' cx="{x:.1f}" cy="{plot.y(r.median):.1f}" r="{6 if mine else 4}" '
                     f'fill="{edge if mine or wrong else "#fff"}" stroke="{edge}" '
                     f'stroke-width="2" data-image="{escape(r.image)}"><title>{tip}</title>'
                     "</circle>")
        parts.append(f'<text x="{x:.1f}" y="{TOP + plot.ph + 16}" text-anchor="middle">'
                     f"{escape(image_label(r.image))}</text><text x=\"{x:.1f}\" "
                     f'y="{TOP + plot.ph + 30}" text-anchor="middle" fill="#666" '
                     f'font-size="10">{escape(r.started[5:10])}</text>')
    return "".join(parts) + "</svg>"


def html_section(run_dir: Path, sweep: str, run_id: str, metric: str = TREND_METRIC) -> str:
    """The History section of a run's report ("" when the history has no earlier run of this
    run's points, or cannot be read). Reads the history as it is (no repair: the report is
    rendered at the run's close, right after the run was indexed)."""
    if not sweep:
        return ""
    try:
        rows = History(Path(run_dir).parent).trend(sweep, metric, sync=False)
    except HistoryError:
        return ""
    mine = {(r.config_id, r.concurrency) for r in rows if r.run_id == run_id}
    by_point: dict[tuple[str, int], list[TrendRow]] = {}
    for r in rows:
        if (r.config_id, r.concurrency) in mine:
            by_point.setdefault((r.config_id, r.concurrency), []).append(r)
    charts = [trend_svg(pts, metric, run_id) for pts in by_point.values() if len(pts) > 1]
    if not charts:
        return ""
    more = len(charts) - MAX_CHARTS
    note = (f"<p>{METRICS[metric][1]} of each point of this run across the sweep's runs in "
            f"the history ({escape(str(Path(run_dir).parent.name))}/history.sqlite), oldest "
            "first: the median of the valid repeats, the bar the point's interval; this run "
            "filled. <code>python -m pytest_ppsweep trend "
            f"{escape(sweep)}</code> prints the numbers."
            + (f" {more} more point(s) not drawn." if more > 0 else "") + "</p>")
    return ('<h3>History</h3><div class="charts ppsweep-history">'
            + "".join(charts[:MAX_CHARTS]) + "</div>" + note)
