"""Hand-written inline SVG charts for the report.

Inline SVG keeps report.html self-contained (no external JS/CSS, opens from a file share) and
costs microseconds per chart. Every text that comes from data is HTML-escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#3b6ea8", "#e07b39", "#4f9a5a", "#b04a5a", "#7d5ba6", "#8c6d46")
_HEIGHT, _TOP, _BOTTOM, _LEFT, _RIGHT = 280, 34, 64, 64, 16


@dataclass(frozen=True)
class Spread:
    """One layout's TTFT distribution at one C: p50 over repeats (min/median/max) and the
    median p95 and p99."""

    p50_min: float
    p50: float
    p50_max: float
    p95: float
    p99: float


def _bar_px(categories: int, groups: int) -> float:
    # Narrower bars for big sweeps, so 20 layouts x 5 C stay within a few screen widths.
    return 24.0 if categories * groups <= 40 else 12.0


def _nice_max(value: float) -> float:
    # Round the axis up to 1/2/2.5/5 x 10^k so the gridlines get readable labels.
    if not math.isfinite(value) or value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= value)


nice_max = _nice_max  # the axes' top, for charts drawn elsewhere (report/pareto.py)


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")


def text_px(text: str, size: float = 11.0) -> float:
    """A generous width estimate of ``text`` in sans-serif at ``size`` px (no font metrics in
    Python): what the layout below reserves, so that no title is clipped and no two labels
    overprint (tests/browser measures the real boxes)."""
    return len(text) * size * 0.62 + 2


_LEGEND_ROW = 14


def _legend_rows(names: Sequence[str], width: float) -> list[list[tuple[int, str, float]]]:
    """The legend's entries ``(index, name, x)`` laid out left to right, wrapping to a new row
    where the next one would cross the right edge."""
    rows: list[list[tuple[int, str, float]]] = [[]]
    x = float(_LEFT)
    for i, name in enumerate(names):
        item = 14 + text_px(name) + 12
        if rows[-1] and x + item > width - _RIGHT:
            rows.append([])
            x = float(_LEFT)
        rows[-1].append((i, name, x))
        x += item
    return rows


def _width_for(title: str, plot_width: float, names: Sequence[str] = ()) -> int:
    """The chart's width: the plot's, and at least the title's (never clipped) and the widest
    legend entry's."""
    legend = max((14 + text_px(n) + 12 for n in names), default=0.0)
    return int(max(plot_width, 360, text_px(title, 13) + 24, _LEFT + _RIGHT + legend))


def _frame(title: str, width: int, top: float, unit: str,
           height: int = _HEIGHT) -> tuple[list[str], float]:
    """SVG header, title, y grid; returns the parts and the pixel height of the plot area (the
    same for every chart: a taller ``height`` is room for more legend rows below it)."""
    plot_h = _HEIGHT - _TOP - _BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="ppsweep-chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<text class="title" x="{width / 2:.0f}" y="18" text-anchor="middle" font-size="13" '
        f'font-weight="bold">{escape(title)}</text>',
    ]
    for i in range(5):
        value = top * i / 4
        y = _TOP + plot_h * (1 - i / 4)
        parts.append(f'<line x1="{_LEFT}" x2="{width - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'stroke="#ddd"/><text x="{_LEFT - 4}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{escape(_fmt(value))}</text>')
    parts.append(f'<text x="12" y="{_TOP + plot_h / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 12 {_TOP + plot_h / 2:.0f})">{escape(unit)}</text>')
    return parts, plot_h


def _legend(names: Sequence[str], width: float) -> str:
    items = []
    for r, row in enumerate(_legend_rows(names, width)):
        y = _HEIGHT - 16 + _LEGEND_ROW * r
        for i, name, x in row:
            items.append(f'<rect class="legend" x="{x:.0f}" y="{y}" width="10" height="10" '
                         f'fill="{PALETTE[i % len(PALETTE)]}"/>'
                         f'<text class="legend" x="{x + 14:.0f}" y="{y + 9}">{escape(name)}'
                         "</text>")
    return "".join(items)


def _height(names: Sequence[str], width: float) -> int:
    return _HEIGHT + _LEGEND_ROW * (len(_legend_rows(names, width)) - 1)


def _step(categories: Sequence[str], groups: int) -> float:
    """A category's width: its bars, and at least its label's width (labels never overprint)."""
    label = max((text_px(c) for c in categories), default=0.0)
    return max(_bar_px(len(categories), groups) * groups + 28, 84.0, label + 10)


def _category_labels(categories: Sequence[str], x0: float, step: float) -> list[str]:
    y = _HEIGHT - _BOTTOM + 14
    return [f'<text class="category" x="{x0 + step * (i + 0.5):.1f}" y="{y}" '
            f'text-anchor="middle">{escape(name)}</text>' for i, name in enumerate(categories)]


def bar_chart(title: str, categories: Sequence[str],
              series: Sequence[tuple[str, Sequence[float]]], unit: str, *,
              limit: float | None = None, limit_label: str = "") -> str:
    """Grouped vertical bars: one group per category, one bar per series (NaN: no bar).
    ``limit`` draws a dashed horizontal line (e.g. the GPU memory capacity)."""
    groups = max(len(series), 1)
    step = _step(categories, groups)
    names = [name for name, _ in series]
    width = _width_for(title, _LEFT + _RIGHT + step * max(len(categories), 1), names)
    values = [v for _, vs in series for v in vs if math.isfinite(v)]
    top = _nice_max(max([*values, limit or 0.0, 0.0]))
    parts, plot_h = _frame(title, width, top, unit, _height(names, width))
    bar_w = (step - 20) / groups
    for s, (name, vs) in enumerate(series):
        color = PALETTE[s % len(PALETTE)]
        for i, value in enumerate(vs):
            if not math.isfinite(value):
                continue
            h = plot_h * value / top
            x = _LEFT + step * i + 10 + bar_w * s
            y = _TOP + plot_h - h
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
                         f'fill="{color}"><title>{escape(categories[i])} {escape(name)}: '
                         f"{escape(_fmt(value))} {escape(unit)}</title></rect>"
                         f'<text x="{x + bar_w / 2 - 1:.1f}" y="{y - 3:.1f}" text-anchor="middle" '
                         f'font-size="9">{escape(_fmt(value))}</text>')
    if limit is not None and math.isfinite(limit):
        y = _TOP + plot_h * (1 - limit / top)
        parts.append(f'<line x1="{_LEFT}" x2="{width - _RIGHT}" y1="{y:.1f}" '
                     f'y2="{y:.1f}" stroke="#b00" stroke-dasharray="5 3"/>'
                     f'<text x="{width - _RIGHT}" y="{y - 3:.1f}" text-anchor="end" '
                     f'fill="#b00">{escape(limit_label)}</text>')
    parts += _category_labels(categories, _LEFT, step)
    parts.append(_legend(names, width))
    return "".join(parts) + "</svg>"


def spread_chart(title: str, categories: Sequence[str],
                 series: Sequence[tuple[str, Sequence[Spread | None]]], unit: str) -> str:
    """TTFT distribution per category and series: a box from median p50 to median p95, a
    whisker up to median p99, and ticks at the lowest and highest per-repeat p50."""
    groups = max(len(series), 1)
    step = _step(categories, groups)
    names = [name for name, _ in series]
    width = _width_for(title, _LEFT + _RIGHT + step * max(len(categories), 1), names)
    values = [v.p99 for _, vs in series for v in vs if v is not None and math.isfinite(v.p99)]
    values += [v.p50_max for _, vs in series for v in vs
               if v is not None and math.isfinite(v.p50_max)]
    top = _nice_max(max([*values, 0.0]))
    parts, plot_h = _frame(title, width, top, unit, _height(names, width))

    def y_of(value: float) -> float:
        return _TOP + plot_h * (1 - value / top)

    slot = (step - 20) / groups
    for s, (name, spreads) in enumerate(series):
        color = PALETTE[s % len(PALETTE)]
        for i, sp in enumerate(spreads):
            if sp is None or not math.isfinite(sp.p50):
                continue
            cx = _LEFT + step * i + 10 + slot * (s + 0.5)
            tip = (f"{escape(categories[i])} {escape(name)}: p50 {escape(_fmt(sp.p50))} "
                   f"(repeats {escape(_fmt(sp.p50_min))} to {escape(_fmt(sp.p50_max))}), "
                   f"p95 {escape(_fmt(sp.p95))}, p99 {escape(_fmt(sp.p99))} {escape(unit)}")
            box_top, box_bottom = y_of(max(sp.p95, sp.p50)), y_of(sp.p50)
            parts.append(
                f"<g><title>{tip}</title>"
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y_of(sp.p99):.1f}" '
                f'y2="{box_top:.1f}" stroke="{color}"/>'
                f'<rect x="{cx - slot / 3:.1f}" y="{box_top:.1f}" width="{slot * 2 / 3:.1f}" '
                f'height="{max(box_bottom - box_top, 1.5):.1f}" fill="{color}" '
                f'fill-opacity="0.35" stroke="{color}"/>'
                + "".join(f'<line x1="{cx - slot / 3:.1f}" x2="{cx + slot / 3:.1f}" '
                          f'y1="{y_of(v):.1f}" y2="{y_of(v):.1f}" stroke="{color}" '
                          f'stroke-width="2"/>' for v in (sp.p50_min, sp.p50, sp.p50_max))
                + "</g>")
    parts += _category_labels(categories, _LEFT, step)
    parts.append(_legend(names, width))
    return "".join(parts) + "</svg>"


def log2_line_chart(title: str, series: Sequence[tuple[str, Sequence[tuple[int, float]]]],
                    unit: str, x_label: str = "message size") -> str:
    """One line per series over a log2 x axis of sizes in bytes (busbw vs size, one line per
    TP domain); x ticks every doubling that has room, labelled 1K, 1M, 256M."""
    xs = sorted({x for _, pts in series for x, _ in pts if x > 0})
    legend_w = 190  # the legend is a column right of the plot: one entry per line
    width = max(520, _LEFT + _RIGHT + 26 * max(len(xs), 1), int(text_px(title, 13)) + 24
                - legend_w) + legend_w
    values = [v for _, pts in series for _, v in pts if math.isfinite(v)]
    top = _nice_max(max([*values, 0.0]))
    parts, plot_h = _frame(title, width, top, unit)
    if not xs:
        return "".join(parts) + "</svg>"
    lo, hi = math.log2(xs[0]), math.log2(xs[-1])
    span = max(hi - lo, 1.0)
    plot_w = width - _LEFT - _RIGHT - 10 - legend_w

    def x_of(size: int) -> float:
        return _LEFT + 5 + plot_w * (math.log2(size) - lo) / span

    def y_of(value: float) -> float:
        return _TOP + plot_h * (1 - value / top)

    every = max(1, math.ceil(len(xs) / 12))
    for i, size in enumerate(xs):
        if i % every and i != len(xs) - 1:
            continue
        label = next((f"{size // m}{u}" for u, m in (("G", 1 << 30), ("M", 1 << 20),
                                                      ("K", 1 << 10)) if size >= m), f"{size}")
        parts.append(f'<text x="{x_of(size):.1f}" y="{_HEIGHT - _BOTTOM + 14}" '
                     f'text-anchor="middle">{escape(label)}</text>')
    parts.append(f'<text x="{_LEFT + 5 + plot_w / 2:.0f}" y="{_HEIGHT - _BOTTOM + 30}" '
                 f'text-anchor="middle">{escape(x_label)}</text>')
    for s, (name, pts) in enumerate(series):
        color = PALETTE[s % len(PALETTE)]
        good = [(x, v) for x, v in sorted(pts) if x > 0 and math.isfinite(v)]
        if not good:
            continue
        path = " ".join(f"{x_of(x):.1f},{y_of(v):.1f}" for x, v in good)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                     f'stroke-width="2"><title>{escape(name)}</title></polyline>')
        parts += [f'<circle cx="{x_of(x):.1f}" cy="{y_of(v):.1f}" r="2.5" fill="{color}">'
                  f"<title>{escape(name)} {x} B: {escape(_fmt(v))} {escape(unit)}</title>"
                  "</circle>" for x, v in good]
    names = [name for name, _ in series]
    items = []
    items.append(f'<rect x="{width - _RIGHT - legend_w + 4}" y="{_TOP - 12}" '
                 f'width="{legend_w}" height="{_HEIGHT - _TOP - _BOTTOM + 12}" fill="#fff"/>')
    for i, name in enumerate(names[:16]):  # legend: a column right of the plot
        x = width - _RIGHT - legend_w + 12
        y = _TOP + 14 * i
        items.append(f'<rect x="{x}" y="{y}" width="10" height="10" '
                     f'fill="{PALETTE[i % len(PALETTE)]}"/>'
                     f'<text class="legend" x="{x + 14}" y="{y + 9}">{escape(name)}</text>')
    parts += items
    return "".join(parts) + "</svg>"


@dataclass(frozen=True)
class XYPlot:
    """The frame of an x/y chart drawn elsewhere (report/pareto.py, report/slocharts.py): the
    SVG element with its title, the scales from 0 to ``x_max``/``y_max`` (values clamped into
    the plot), a 4 × 4 grid with tick labels, and the axis names."""

    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    x_max: float
    y_max: float

    @property
    def pw(self) -> float:
        return self.width - self.left - self.right

    @property
    def ph(self) -> float:
        return self.height - self.top - self.bottom

    def x(self, v: float) -> float:
        return self.left + self.pw * min(max(v, 0.0), self.x_max) / self.x_max

    def y(self, v: float) -> float:
        return self.top + self.ph * (1 - min(max(v, 0.0), self.y_max) / self.y_max)

    def start(self, css: str, title: str, attrs: str = "") -> list[str]:
        """The opening ``<svg>`` (class ``ppsweep-chart <css>``; ``viewBox`` scales it to the
        page) and its title line."""
        t = escape(title)
        return [f'<svg xmlns="http://www.w3.org/2000/svg" class="ppsweep-chart {css}"{attrs} '
                f'viewBox="0 0 {self.width} {self.height}" width="100%" '
                f'style="max-width:{self.width}px" role="img" aria-label="{t}" '
                f'font-family="sans-serif" font-size="12"><title>{t}</title>',
                f'<text class="title" x="{self.left + self.pw / 2:.0f}" y="20" '
                f'text-anchor="middle" font-size="14" font-weight="bold">{t}</text>']

    def grid(self, y_tick: str = "{:.3g}") -> list[str]:
        """Grid lines and tick labels: ``y_tick`` formats the y values, x values as 3 digits."""
        out = []
        for i in range(5):
            gy, gx = self.y_max * i / 4, self.x_max * i / 4
            out.append(f'<line x1="{self.left}" x2="{self.left + self.pw}" y1="{self.y(gy):.1f}" '
                       f'y2="{self.y(gy):.1f}" stroke="#e4e4e4"/><text x="{self.left - 5}" '
                       f'y="{self.y(gy) + 4:.1f}" text-anchor="end">{y_tick.format(gy)}</text>'
                       f'<text x="{self.x(gx):.1f}" y="{self.top + self.ph + 16}" '
                       f'text-anchor="middle">{gx:.3g}</text>')
        return out

    def axis_names(self, x_name: str, y_name: str) -> str:
        mid = f"{self.top + self.ph / 2:.0f}"
        return (f'<text x="{self.left + self.pw / 2:.0f}" y="{self.height - 12}" '
                f'text-anchor="middle">{escape(x_name)}</text><text x="16" y="{mid}" '
                f'text-anchor="middle" transform="rotate(-90 16 {mid})">{escape(y_name)}</text>')
