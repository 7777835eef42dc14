"""The sweep summary on the terminal: per workload, the medians table in that workload's own
metrics (prefill: Input TPS and TTFT; decode: output TPS, TPOT and ITL, results/objective.py)
with its deltas and verdicts, then every INVALID reason and the Answers block, each line at
most ``width`` wide (report/format.fit_table: a table that does not fit wraps; nothing is cut).

Every Δ names the point it is measured against: the title when every row of the table is
compared with one point, else a ``Δ vs <point>:`` line above the rows compared with it (an axis
sweep compares each point with its own workload's and axis values' baseline layout). A legend
under each table spells out its abbreviations. When the baseline is not in this run, one line
says where its numbers come from (an earlier run) or that there are none, and then the table has
no delta columns.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ppsweep.report.answerview import terminal_lines
from pytest_ppsweep.report.axisview import confounded_text
from pytest_ppsweep.report.energyview import energy_lines
from pytest_ppsweep.report.format import delta, fit_table, num, records
from pytest_ppsweep.results.aggregate import (
    Summary,
    layout_label,
)
from pytest_ppsweep.results.answers import Answer, expected_failures
from pytest_ppsweep.results.objective import is_decode
from pytest_ppsweep.results.verdict import Verdict


def _seconds(value: Any) -> str:
    return num(value, 2, " s")


def _millis(value: Any) -> str:
    try:
        return num(float(value) * 1000.0, 1, " ms")
    except (TypeError, ValueError):
        return "n/a"


@dataclass(frozen=True)
class View:
    """The columns of one kind of workload: (summary column, title, format) per value and
    (delta column, title, metric) per delta, and what its other abbreviations mean."""

    values: tuple[tuple[str, str, Callable[[Any], str]], ...]
    deltas: tuple[tuple[str, str, str], ...]
    abbreviations: str = ""

    def legend(self, deltas: bool, ref: str = "") -> str:
        """The line under the table: every abbreviation of its header spelled out; ``ref``:
        the one point every Δ is measured against ("": each group's own, named in its
        heading)."""
        parts = [self.abbreviations] if self.abbreviations else []
        if deltas:
            against = (f"against {ref}" if ref
                       else "against the point its group's heading names (\"Δ vs …\")")
            parts.append(f"{', '.join(t for _, t, _ in self.deltas)}: % change of "
                         f"{', '.join(m for _, _, m in self.deltas)} {against}; that point's "
                         "own row reads \"base\"")
        return "(" + "; ".join([*parts, "C: concurrency"]) + ")"


# the heading of the rows no measured point is compared with (their partners failed or were
# not run): they have no Δ
NO_DELTA_HEADING = "no Δ: the point these compare with was not measured:"


PREFILL = View(
    values=(("input_tps", "Input TPS", num), ("ttft_p50_s", "TTFT p50", _seconds),
            ("ttft_p95_s", "TTFT p95", _seconds)),
    deltas=(("tps_vs_base_pct", "ΔTPS", "Input TPS"), ("ttft_p50_vs_base_pct", "ΔTTFT",
                                                       "TTFT p50")),
)
DECODE = View(
    values=(("output_tps", "Out TPS", num), ("tpot_p50_s", "TPOT p50", _millis),
            ("itl_p50_s", "ITL p50", _millis)),
    deltas=(("output_tps_vs_base_pct", "ΔOut TPS", "Out TPS"), ("tpot_p50_vs_base_pct",
                                                                "ΔTPOT", "TPOT p50")),
    abbreviations="Out TPS: output tokens/s; TPOT: time per output token; ITL: inter-token "
                  "latency",
)
def view_of(objective: str) -> View:
    """A workload's view from its objective (``output_tps tpot_p50_s``): decode when it is
    ranked by a decode metric first (results/objective.is_decode), else prefill."""
    return DECODE if is_decode(str(objective or "").split()) else PREFILL


def terminal_summary(summary: Summary, verdicts: Sequence[Verdict],
                     answers: Sequence[Answer], width: int = 100) -> list[str]:
    """The medians tables with deltas and verdicts, then the **Answers** block
    (report/answerview.py), every line at most ``width``."""
    by_key = {(v.config_id, v.concurrency): v for v in verdicts}
    rows = records(summary.table)
    layouts = summary.table["layout"].astype(str)
    # Two configs may share a layout (other flags differ), or be an axis sweep's variants of
    # one (their labels carry the variant): then the id tells them apart.
    plain = [layout_label(r["pp"], r["tp"], r["ep"], "") for r in rows]
    use_id = (layouts.nunique() != summary.table["config_id"].nunique()
              or any(label != p for label, p in zip(layouts, plain, strict=True)))
    deltas = not summary.no_deltas
    blocks: dict[str, list[dict[str, Any]]] = {}
    rank = {cid: i for i, cid in enumerate(summary.order)}
    for r in sorted(rows, key=lambda r: rank.get(str(r["config_id"]), len(rank))):
        blocks.setdefault(str(r.get("workload") or ""), [])
    for r in rows:  # by C, then sweep order
        blocks[str(r.get("workload") or "")].append(r)
    several = len(blocks) > 1
    lines: list[str] = []
    if summary.baseline_note:  # the baseline is not in this run: where its numbers come from
        lines += _wrap(summary.baseline_note, width)
    for workload, block in blocks.items():
        view = view_of(str(block[0].get("objective") or ""))
        refs = list(dict.fromkeys(_ref(summary, r) for r in block)) if deltas else [""]
        refs.sort(key=lambda ref: not ref)  # the points without a Δ last, after every group
        # several workloads: a table per workload, its points named without the workload
        suffix = f"-{workload}" if several else ""
        title = "PP/TP/EP sweep" + (f", workload {workload} (ids without {suffix})"
                                    if several else "") + ": medians over repeats"
        if deltas and len(refs) == 1 and refs[0]:
            title += (", Δ vs baseline " if refs[0] == summary.baseline else ", Δ vs ") + \
                refs[0].removesuffix(suffix)
        lines += _wrap(title, width)
        titles = ["config" if use_id else "PP/TP/EP", "C", *(t for _, t, _ in view.values),
                  *((t for _, t, _ in view.deltas) if deltas else ()), "verdict"]
        body: list[Sequence[str] | str] = []
        for ref in refs:
            mine = [r for r in block if not deltas or _ref(summary, r) == ref]
            if len(refs) > 1:
                body.append(f"Δ vs {ref.removesuffix(suffix)}:" if ref else NO_DELTA_HEADING)
            for r in mine:
                body.append(_row(r, view, use_id, deltas, ref, by_key, suffix))
        lines += fit_table(titles, body, width, align="<" + ">" * (len(titles) - 2) + "<")
        lines += _wrap(view.legend(deltas, refs[0].removesuffix(suffix)
                                   if len(refs) == 1 else ""), width)
        lines += headroom_lines(summary, block, use_id, width, suffix)
        lines += kv_lines(summary, block, use_id, width, suffix)
    lines += energy_lines(summary, width)
    # INVALID points, and VALID ones with a warning (spread_rule = "warn"), with their reasons.
    # a failure the sweep expected ([[expect]]) says so before its INVALID
    expected = expected_failures(answers)
    texts = [f"{v.config_id} C={v.concurrency}: " + (
        f"{expected[v.config_id]}; " if not v.valid and v.config_id in expected else "")
        + v.text for v in verdicts if not v.valid or v.warnings]
    texts += confounded_text(summary.comparisons)
    for text in texts:
        lines += _wrap(text, width)
    return lines + terminal_lines(answers, width)


HEADROOM_TITLE = "worst-rank GPU memory headroom (free after the benchmark)"


def headroom_lines(summary: Summary, block: Sequence[dict[str, Any]], use_id: bool, width: int,
                   suffix: str = "") -> list[str]:
    """Each point's worst-rank GPU memory headroom beside its table's speed (configs.csv; the
    seeds' §8 table gives it so: a layout fast but near its memory limit is a risk), named
    as the table names it, in its order, wrapped between points (a point and its figure stay
    on one line); none when no point of ``block`` has it."""
    room: dict[str, float] = {}
    for r in records(summary.configs):
        try:
            value = float(r.get("mem_headroom_mib"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if value == value:  # not NaN
            room[str(r["config_id"])] = value
    named: dict[str, str] = {}
    for r in block:
        cid = str(r["config_id"])
        name = cid.removesuffix(suffix) if use_id else str(r["layout"])
        named.setdefault(name, f"{room[cid]:,.0f} MiB" if cid in room else "n/a")
    if not any(v != "n/a" for v in named.values()):
        return []
    glued = "; ".join(f"{n}: {v}".replace(" ", "\x00") for n, v in named.items())
    return _wrap(f"{HEADROOM_TITLE}: {glued}", width)


KV_TITLE = "KV cache capacity the engine reports (tokens; requests of this workload at once)"


def kv_lines(summary: Summary, block: Sequence[dict[str, Any]], use_id: bool, width: int,
             suffix: str = "") -> list[str]:
    """Each point's KV cache capacity as its engine reports it (configs.csv ``kv_tokens``) and
    how many of its workload's requests that holds at once (``kv_requests``): the concurrency
    past which requests queue for KV, which differs by layout (the cache per GPU grows with TP),
    named and wrapped as :func:`headroom_lines`; none when no point of ``block`` has it."""
    found: dict[str, str] = {}
    for r in records(summary.configs):
        try:
            tokens, held = float(r.get("kv_tokens")), float(r.get("kv_requests"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if tokens == tokens and held == held:  # not NaN
            found[str(r["config_id"])] = f"{tokens:,.0f} ({held:,.0f})"
    named: dict[str, str] = {}
    for r in block:
        cid = str(r["config_id"])
        name = cid.removesuffix(suffix) if use_id else str(r["layout"])
        named.setdefault(name, found.get(cid, "n/a"))
    if not any(v != "n/a" for v in named.values()):
        return []
    glued = "; ".join(f"{n}: {v}".replace(" ", "\x00") for n, v in named.items())
    return _wrap(f"{KV_TITLE}: {glued}", width)


def _ref(summary: Summary, r: dict[str, Any]) -> str:
    """The point a row's deltas are measured against (the run's baseline for a table built
    without the comparisons)."""
    if "vs_base_of" not in r:
        return summary.baseline
    ref = r.get("vs_base_of")
    return "" if ref is None or (isinstance(ref, float) and ref != ref) else str(ref)


def _row(r: dict[str, Any], view: View, use_id: bool, deltas: bool, ref: str,
         by_key: dict[tuple[str, int], Verdict], suffix: str = "") -> list[str]:
    """One row; ``suffix``: the workload's id part, left out of the ids of its own table."""
    v = by_key.get((str(r["config_id"]), int(r["concurrency"])))
    base = bool(ref) and str(r["config_id"]) == ref
    name = str(r["config_id"]).removesuffix(suffix) if use_id else str(r["layout"])
    cells = [name, str(r["concurrency"]),
             *(fmt(r.get(column)) for column, _, fmt in view.values)]
    if deltas:
        cells += ["base" if base else delta(r.get(column)) for column, _, _ in view.deltas]
    verdict = "n/a" if v is None else "VALID" if v.valid else "INVALID"
    return [*cells, verdict + _extra(r.get("extra_repeats"))]


def _extra(count: object) -> str:
    """`` (+2 extra)``: rounds beyond the planned repeats (adaptive repeats), else ""."""
    try:
        n = int(count)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ""
    return f" (+{n} extra)" if n > 0 else ""


def _wrap(text: str, width: int) -> list[str]:
    # Keep "6.63 %" on one line: hide the space before "%" from textwrap, then restore it.
    glued = textwrap.wrap(text.replace(" %", "\x00%"), width, subsequent_indent="    ",
                          break_on_hyphens=False)
    return [line.replace("\x00", " ") for line in glued]
