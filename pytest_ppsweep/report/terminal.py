"""The sweep summary on the terminal: the medians table with deltas vs baseline and verdicts,
then every INVALID reason and the Answers block, each line at most ``width`` wide. When the
baseline is not in this run, one line says where its numbers come from (an earlier run) or that
there are none, and then the table has no delta columns.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from pytest_ppsweep.report.answerview import terminal_lines
from pytest_ppsweep.report.axisview import confounded_text
from pytest_ppsweep.report.format import delta, num, records
from pytest_ppsweep.results.aggregate import (
    Summary,
    layout_label,
)
from pytest_ppsweep.results.answers import Answer
from pytest_ppsweep.results.verdict import Verdict


def terminal_summary(summary: Summary, verdicts: Sequence[Verdict],
                     answers: Sequence[Answer], width: int = 100) -> list[str]:
    """The medians table with deltas vs baseline and verdicts, then the **Answers** block
    (report/answerview.py), every line at most ``width``."""
    by_key = {(v.config_id, v.concurrency): v for v in verdicts}
    layouts = summary.table["layout"].astype(str)
    # Two configs may share a layout (other flags differ), or be an axis sweep's variants of
    # one (their labels carry the variant): then the id, shown whole, tells them apart.
    plain = [layout_label(r["pp"], r["tp"], r["ep"], "") for r in records(summary.table)]
    use_id = (layouts.nunique() != summary.table["config_id"].nunique()
              or any(label != p for label, p in zip(layouts, plain, strict=True)))
    deltas = not summary.no_deltas
    # Axis points' ids (pp4-tp8-ep8-a2a_deepep) are shown whole, up to 34 characters.
    col = min(max([14, *(len(str(c)) + 1 for c in summary.table["config_id"])]), 35) if (
        use_id) else 14
    head = (f"{'config' if use_id else 'PP/TP/EP':<{col}}{'C':>4}{'Input TPS':>11}{'TTFT p50':>10}"
            f"{'TTFT p95':>10}" + (f"{'ΔTPS':>10}{'ΔTTFT':>10}" if deltas else "") + "  verdict")
    if summary.baseline_note:  # the baseline is not in this run: where its numbers come from
        lines = ["PP/TP/EP sweep: medians over repeats"[:width],
                 *_wrap(summary.baseline_note, width), head[:width]]
    else:
        lines = [f"PP/TP/EP sweep: medians over repeats, Δ vs baseline {summary.baseline}"[:width],
                 head[:width]]
    for r in records(summary.table):
        v = by_key.get((str(r["config_id"]), int(r["concurrency"])))
        name = str(r["config_id"] if use_id else r["layout"])
        name = name if len(name) <= col - 1 else name[:col - 2] + "…"
        base = r["config_id"] == summary.baseline
        row = (f"{name:<{col}}{r['concurrency']:>4}{num(r['input_tps']):>11}"
               f"{num(r['ttft_p50_s'], 2, ' s'):>10}{num(r['ttft_p95_s'], 2, ' s'):>10}"
               + (f"{'base' if base else delta(r['tps_vs_base_pct']):>10}"
                  f"{'base' if base else delta(r['ttft_p50_vs_base_pct']):>10}" if deltas else "")
               + f"  {'n/a' if v is None else 'VALID' if v.valid else 'INVALID'}"
               + _extra(r.get("extra_repeats")))
        lines.append(row[:width])
    # INVALID points, and VALID ones with a warning (spread_rule = "warn"), with their reasons.
    texts = [f"{v.config_id} C={v.concurrency}: {v.text}" for v in verdicts
             if not v.valid or v.warnings]
    texts += confounded_text(summary.comparisons)
    for text in texts:
        lines += _wrap(text, width)
    return lines + terminal_lines(answers, width)


def _extra(count: object) -> str:
    """`` (+2 extra)``: rounds beyond the planned repeats (adaptive repeats), else ""."""
    try:
        n = int(count)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ""
    return f" (+{n} extra)" if n > 0 else ""


def _wrap(text: str, width: int) -> list[str]:
    # Keep "6.63 %" on one line: hide the space before "%" from textwrap, then restore it.
    glued = textwrap.wrap(text.replace(" %", "\x00%"), width, subsequent_indent="    ")
    return [line.replace("\x00", " ") for line in glued]
