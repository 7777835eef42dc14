"""The report's "Where the time goes (§9.3)": the profile window of each profiled layout.

The seeds' §9.3 table (calls, cumulative, p50 per call, overlap per collective kind, medians of
the stable ranks, with deltas vs the baseline layout), and one stacked bar per layout: the
share of the window spent computing, communicating with nothing to overlap it (exposed), and
idle. Read from ``profile/<layout>/attribution.json`` alone, so a rebuilt report has it too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from pytest_ppsweep.profile.attribution import table_rows
from pytest_ppsweep.profile.tracefiles import in_order
from pytest_ppsweep.report.format import delta

KIND_LABEL = {
    "all_reduce": "AllReduce",
    "send_recv": "Send/Recv + waits",
    "all_gather": "AllGather",
    "reduce_scatter": "ReduceScatter",
    "all_to_all": "AllToAll",
    "other": "other (broadcast, barrier)",
}
BAR_COLORS = (("compute", "#2a6f97"), ("exposed communication", "#c0392b"), ("idle", "#bbb"))


def _pct(value: Any) -> str:
    return "—" if value is None else f"{float(value) * 100:.2f} %"


def _signed(value: Any) -> str:
    return "" if value is None else f" ({delta(float(value) * 100)})"


def share_bars(layouts: dict[str, dict[str, Any]]) -> str:
    """One horizontal stacked bar per layout: compute / exposed communication / idle."""
    width, left, row = 620, 130, 26
    height = 34 + row * len(layouts)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11" role="img">'
             '<text x="4" y="14" font-weight="bold">Share of the profile window per layout'
             "</text>"]
    x = left
    for label, color in BAR_COLORS:
        parts.append(f'<rect x="{x}" y="20" width="10" height="10" fill="{color}"/>'
                     f'<text x="{x + 14}" y="29">{escape(label)}</text>')
        x += 30 + 7 * len(label)
    for i, (cid, lp) in enumerate(layouts.items()):
        y = 38 + row * i
        parts.append(f'<text x="4" y="{y + 13}">{escape(cid)}</text>')
        at = float(left)
        shares = (lp["compute_share"], lp["exposed_share"], lp["idle_share"])
        for (label, color), share in zip(BAR_COLORS, shares, strict=True):
            w = (width - left - 10) * max(float(share), 0.0)
            parts.append(f'<rect x="{at:.1f}" y="{y}" width="{w:.1f}" height="18" '
                         f'fill="{color}"><title>{escape(cid)} {escape(label)}: '
                         f"{float(share) * 100:.1f} %</title></rect>")
            if w > 34:
                parts.append(f'<text x="{at + 3:.1f}" y="{y + 13}" fill="#fff">'
                             f"{float(share) * 100:.0f} %</text>")
            at += w
    return "".join(parts) + "</svg>"


def profile_section(attributions: Mapping[str, dict[str, Any]], baseline: str,
                    order: Sequence[str] = ()) -> str:
    """The section's HTML from each profiled layout's attribution.json as read
    (``FolderFiles.attributions``); empty when no layout of the run was profiled."""
    layouts = in_order(attributions, order)
    if not layouts:
        return ""
    rows = table_rows(layouts, baseline)
    base = baseline if baseline in layouts else ""
    head = ("<tr><th class=\"l\">layout</th><th class=\"l\">collective</th><th>calls / rank</th>"
            "<th>cumulative ms</th><th>p50 per call ms</th><th>overlap</th>"
            "<th>exposed comm</th><th>ranks (stable)</th></tr>")
    body = []
    for r in rows:
        if r["config_id"] == base:  # the baseline itself: no delta
            r = {**r, "calls_delta": None, "cumulative_delta": None, "p50_delta": None}
        body.append(
            f'<tr><td class="l">{escape(r["config_id"])}</td>'
            f'<td class="l">{escape(KIND_LABEL.get(r["kind"], r["kind"]))}</td>'
            f"<td>{r['calls']:,.0f}{_signed(r['calls_delta'])}</td>"
            f"<td>{r['cumulative_ms']:,.1f}{_signed(r['cumulative_delta'])}</td>"
            f"<td>{r['p50_ms']:,.2f}{_signed(r['p50_delta'])}</td>"
            f"<td>{_pct(r['overlap_ratio'])}</td><td>{_pct(r['exposed_share'])}</td>"
            f"<td>{r['ranks']} ({r['stable_ranks']})</td></tr>"
        )
    notes = []
    for cid, lp in layouts.items():
        other = float(lp.get("non_all_reduce_ms", 0.0))
        if other > 0:
            notes.append(f"{escape(cid)}: {other:,.1f} ms of communication other than plain "
                         "AllReduce (Send/Recv plus stage waits: mostly waiting for the "
                         "neighbouring stage, not transfer time)")
        if lp.get("ranks") and len(lp.get("stable", [])) < len(lp["ranks"]):
            left_out = sorted(set(lp["ranks"]) - set(lp["stable"]))
            notes.append(f"{escape(cid)}: not in the medians (too few calls): "
                         f"{escape(', '.join(left_out))}")
    vs = (f"Δ vs {escape(base)} in brackets." if base else
          "No delta: the baseline layout was not profiled in this run.")
    return ("<h3>Where the time goes (§9.3)</h3>"
            "<p>Profile window: one extra round per layout, not in the medians, wrapped by "
            "the engine's profiler (its start and stop requests). Per collective kind, the "
            f"median over the layout's stable ranks of each rank's own numbers. {vs} Overlap: "
            "share of communication time covered by compute; exposed comm: communication not "
            "overlapped by compute, as a share of the window.</p>"
            f"<table><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
            + "".join(f"<p>{n}</p>" for n in notes)
            + f'<div class="charts">{share_bars(layouts)}</div>')
