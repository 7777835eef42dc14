"""The sweep report: HTML fragments for pytest-html, a terminal table, and a standalone rebuild.

Every value that comes from the run (config ids, errors, log findings, metadata) goes through
``html.escape``: log lines are attacker-controlled as far as a browser is concerned.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pandas as pd

from pytest_ppsweep.folder.runfolder import EVIDENCE as FOLDER_EVIDENCE
from pytest_ppsweep.folder.runfolder import (
    GPU_DIR,
    RAW_DIR,
    REBUILT_HTML,
    SERVICE_DIR,
    FolderFiles,
    RunKey,
)
from pytest_ppsweep.gate.comparison import (
    correctness_failures,
    read_comparison_csv,
    wrong_image_line,
)
from pytest_ppsweep.report import accuracyview, plannerview, sloview, trendview
from pytest_ppsweep.report.answerview import html_block, reasons_html
from pytest_ppsweep.report.charts import Spread, bar_chart, spread_chart
from pytest_ppsweep.report.commview import comm_html
from pytest_ppsweep.report.energyview import energy_html
from pytest_ppsweep.report.format import delta, num, records
from pytest_ppsweep.report.profileview import profile_section
from pytest_ppsweep.report.terminal import DECODE, view_of
from pytest_ppsweep.results.aggregate import (
    RunData,
    Summary,
)
from pytest_ppsweep.results.answers import (
    DECIDED,
    DECIDED_ONE_BOOT,
    EQUIVALENT,
    INCONCLUSIVE,
    MEASURED,
    NO_VALID_POINT,
    ONE_BOOT_NOTE,
    Answer,
    expected_failures,
)
from pytest_ppsweep.results.pipeline import analyse, save
from pytest_ppsweep.results.runstatus import INTERRUPTED, PARTIAL, RUNNING
from pytest_ppsweep.results.sloanswer import KIND as SLO_KIND
from pytest_ppsweep.results.sloanswer import NO_LAYOUT, over_text
from pytest_ppsweep.results.verdict import Verdict

REBUILT_NAME = REBUILT_HTML
EVIDENCE = FOLDER_EVIDENCE
# The style of the summary, also in pytest-html's page: there its body{min-width:800px} plus the
# body's 8 px margins would scroll an 800 px window sideways, so narrow windows lift it, and let
# the cells of its results table (long test ids) wrap.
_STYLE = """<style>
.ppsweep{color:#111;max-width:100%}.ppsweep h3{color:#000}
.ppsweep table,table.ppsweep-gate{border-collapse:collapse;margin:6px 0 14px;max-width:100%;
font-size:12px}
.ppsweep th,.ppsweep td,.ppsweep-gate th,.ppsweep-gate td{border:1px solid #ccc;padding:3px 7px;
text-align:right}
.ppsweep th,.ppsweep-gate th{background:#f2f2f2;color:#000}
.ppsweep td{white-space:nowrap}.ppsweep-gate td{color:#111;overflow-wrap:anywhere}
.ppsweep td.l,.ppsweep td.w{white-space:normal;overflow-wrap:anywhere}
.ppsweep td.l,.ppsweep th.l,.ppsweep td.w{text-align:left}
.ppsweep tr.invalid td{background:#fde8e8}.ppsweep .bad{color:#a00}.ppsweep .ok{color:#070}
.ppsweep .expected{color:#8a5a00}
.ppsweep-banner{background:#b00;color:#fff;font-weight:bold;padding:8px 12px;font-size:15px}
.ppsweep .charts svg{margin:4px 12px 12px 0;border:1px solid #eee;box-sizing:border-box;
max-width:calc(100% - 12px);height:auto}
.ppsweep-decision{border:2px solid #2a6;border-radius:6px;padding:10px 14px;margin:8px 0 14px;
background:#f4fbf6;font-size:14px;max-width:1100px;box-sizing:border-box}
.ppsweep-decision.none{border-color:#b00;background:#fdf2f2}
.ppsweep-decision.open{border-color:#c80;background:#fff8ea}
.ppsweep-decision .runstatus{color:#333;font-size:13px;border-top:1px solid #ddd;padding-top:4px}
.ppsweep-decision p{color:#111;margin:4px 0}
.ppsweep-decision .use{font-size:20px;margin:0 0 6px}.ppsweep-decision .use b{color:#075}
.ppsweep-decision table{margin:6px 0 8px;font-size:13px;background:#fff}
.ppsweep-decision .trust{margin:4px 0;padding-left:18px}.ppsweep-decision .trust li{margin:2px 0}
.ppsweep-decision .better{color:#070}.ppsweep-decision .worse{color:#a00}
@media (max-width:1000px){.ppsweep th,.ppsweep td{padding:2px 4px}
#results-table{max-width:100%}#results-table td{overflow-wrap:anywhere}}
@media (max-width:816px){body{min-width:0}}
</style>"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 2,
           classes: Sequence[str] = (), wrap: Sequence[int] = ()) -> str:
    """An HTML table; cells must already be escaped. The first ``left`` columns are text, which
    wraps (anywhere, so that a narrow screen never scrolls sideways), like the ``wrap`` columns;
    numbers stay on one line."""
    def cls(i: int) -> str:
        return ' class="l"' if i < left else ' class="w"' if i in wrap else ""

    text = ' class="l"'
    head = "".join(f"<th{text if i < left or i in wrap else ''}>{h}</th>"
                   for i, h in enumerate(headers))
    body = []
    for r, row in enumerate(rows):
        tr = f' class="{classes[r]}"' if r < len(classes) and classes[r] else ""
        body.append(f"<tr{tr}>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(row))
                    + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _banner(data: RunData) -> str:
    if not (data.meta.simulated or _truthy_any(data.results.get("simulated"))):
        return ""
    return (f'<div class="ppsweep-banner">SIMULATED RUN: {escape(data.meta.engine)} emulator, '
            f"time scale x{escape(num(data.meta.time_scale, 0))}. Times are emulated seconds; "
            "the numbers describe the emulator profile, not real hardware.</div>")


def _truthy_any(column: pd.Series | None) -> bool:
    if column is None:
        return False
    return bool(column.astype(str).str.lower().isin(["true", "1"]).any())


def _metadata(data: RunData) -> str:
    meta = data.meta
    rows = [("Run id", meta.run_id), ("Image", meta.image), ("Engine", meta.engine),
            ("Engine version", meta.engine_version or "unknown"), ("Cluster", meta.cluster),
            ("Matrix file", meta.matrix), ("Baseline", meta.baseline),
            ("Spread threshold", f"{meta.spread_threshold * 100:.1f} %"),
            ("Minimum repeats", str(meta.min_repeats))]
    return "<h3>Run</h3>" + _table(["Field", "Value"], [(escape(k), escape(v)) for k, v in rows])


def _vs(summary: Summary, r: dict[str, Any]) -> str:
    """The point a row's deltas are measured against (aggregate's ``vs_base_of``; the run's
    baseline for a table without it)."""
    ref = r.get("vs_base_of", summary.baseline)
    return "" if ref is None or (isinstance(ref, float) and ref != ref) else str(ref)


def _is_decode(r: dict[str, Any]) -> bool:
    return view_of(str(r.get("objective") or "")) is DECODE


def _medians(summary: Summary, verdicts: dict[tuple[str, int], Verdict]) -> str:
    """The medians over repeats: prefill rows in Input TPS and TTFT, decode rows in a table of
    their own, in output TPS, TPOT and ITL (the terminal's views, report/terminal.py)."""
    table = records(summary.table)
    decode = [r for r in table if _is_decode(r)]
    prefill = [r for r in table if not _is_decode(r)]
    return ((_prefill_medians(summary, verdicts, prefill) if prefill else "")
            + (_decode_medians(summary, verdicts, decode) if decode else ""))


def _decode_medians(summary: Summary, verdicts: dict[tuple[str, int], Verdict],
                    table: list[dict[str, Any]]) -> str:
    rows, classes = [], []
    for r in table:
        v = verdicts.get((str(r["config_id"]), int(r["concurrency"])))
        ref = _vs(summary, r)
        is_base = r["config_id"] == ref
        rows.append([escape(str(r["layout"])), escape(str(r["config_id"])), str(r["concurrency"]),
                     str(r["repeats"]) + _extra_html(r.get("extra_repeats")),
                     num(r.get("output_tps")), num(_ms(r.get("tpot_p50_s")), 1, " ms"),
                     num(_ms(r.get("itl_p50_s")), 1, " ms")]
                    + ([] if summary.no_deltas else ["baseline"] * 2 if is_base else [
                       delta(r.get("output_tps_vs_base_pct")),
                       delta(r.get("tpot_p50_vs_base_pct"))])
                    + ([] if summary.no_deltas else [escape(ref or "none")])
                    + [escape(v.text) if v else "n/a"])
        classes.append("" if v is None or v.valid else "invalid")
    headers = ["PP / TP / EP", "Config", "C", "Repeats", "Output TPS", "TPOT p50", "ITL p50",
               *([] if summary.no_deltas else ["Output TPS vs base", "TPOT p50 vs base",
                                               "Δ vs"]), "Verdict"]
    wrap = (len(headers) - 2, len(headers) - 1) if not summary.no_deltas else (
        len(headers) - 1,)
    return ("<h3>Decode medians over repeats (output TPS, time per output token, inter-token "
            "latency), each row's deltas vs the point in its Δ vs column</h3>"
            + _table(headers, rows, 2, classes, wrap=wrap))


def _ms(value: Any) -> float:
    try:
        return float(value) * 1000.0
    except (TypeError, ValueError):
        return math.nan


def _prefill_medians(summary: Summary, verdicts: dict[tuple[str, int], Verdict],
                     table: list[dict[str, Any]]) -> str:
    rows, classes = [], []
    refs = {_vs(summary, r) for r in table}
    # one point for every row: the title names it; else each row names its own (an axis
    # sweep's rows compare with their own workload's and axis values' baseline layout)
    per_row = len(refs) > 1 and not summary.no_deltas
    for r in table:
        v = verdicts.get((str(r["config_id"]), int(r["concurrency"])))
        is_base = r["config_id"] == _vs(summary, r)
        rows.append([escape(str(r["layout"])), escape(str(r["config_id"])), str(r["concurrency"]),
                     str(r["repeats"]) + _extra_html(r.get("extra_repeats")),
                     num(r["input_tps"]), num(r["ttft_p50_s"], 2, " s"),
                     num(r["ttft_p95_s"], 2, " s"), num(r["ttft_p99_s"], 2, " s"),
                     num(r["tps_spread_pct"], 2, " %")]
                    + ([] if summary.no_deltas else ["baseline"] * 3 if is_base else [
                       delta(r["tps_vs_base_pct"]), delta(r["ttft_p50_vs_base_pct"]),
                       delta(r["ttft_p95_vs_base_pct"])])
                    + ([escape(_vs(summary, r) or "none")] if per_row else [])
                    + [escape(v.text) if v else "n/a"])
        classes.append("" if v is None or v.valid else "invalid")
    headers = ["PP / TP / EP", "Config", "C", "Repeats", "Input TPS", "TTFT p50", "TTFT p95",
               "TTFT p99", "TPS spread", *([] if summary.no_deltas else [
                   "Input TPS vs base", "TTFT p50 vs base", "TTFT p95 vs base"]),
               *(["Δ vs"] if per_row else []), "Verdict"]
    # The baseline not in this run: say where its numbers come from, or why there are none.
    only = next(iter(refs), "") if len(refs) == 1 else ""
    title = (f"Medians over repeats; {escape(summary.baseline_note)}" if summary.baseline_note
             else "Medians over repeats, each row's deltas vs the point in its Δ vs column"
             if per_row else "Medians over repeats, deltas vs "
             + ("baseline " if (only or summary.baseline) == summary.baseline else "")
             + escape(only or summary.baseline))
    wrap = (len(headers) - 2, len(headers) - 1) if per_row else (len(headers) - 1,)
    return f"<h3>{title}</h3>" + _table(headers, rows, 2, classes, wrap=wrap)


def _extra_html(count: Any) -> str:
    """`` (2 extra)`` after a point's repeats when adaptive repeats added rounds."""
    try:
        n = int(count)
    except (TypeError, ValueError):
        return ""
    return f" ({n} extra)" if n > 0 else ""


def _steps(summary: Summary) -> str:
    # Steps stay within one workload and one set of axis values (aggregate.with_comparisons);
    # one that differs in more than the layout is marked.
    rows = [[escape(f"{r['step_from']} -> {r['config_id']}")
             + (" <b>CONFOUNDED</b>" if r.get("step_confounded") is True else ""),
             str(r["concurrency"]), delta(r["tps_step_pct"]), delta(r["ttft_p50_step_pct"])]
            for r in records(summary.table) if isinstance(r["step_from"], str)]
    return ("<h3>Step-to-step deltas (consecutive layouts in sweep order, same workload and "
            "axis values)</h3>"
            + _table(["Change", "C", "Input TPS step", "TTFT p50 step"], rows, 1))


def _link(run_dir: Path, target: str, label: str | None = None) -> str:
    """A link to evidence; a target that was never written is plain text, not a dead link."""
    if not (run_dir / unquote(target)).exists():
        return f"{escape(label or target)} (not written)"
    return f'<a href="{escape(target)}">{escape(label or target)}</a>'


def _memory(data: RunData, summary: Summary) -> str:
    rows_in = records(summary.configs)
    # A run over a pool of clusters (pytest-xdist) says which cluster measured which layout.
    pooled = len({_plain(r["cluster"]) for r in rows_in} - {"?"}) > 1
    # The KV cache as the engine reported it (configs.csv kv_tokens) and how many of the
    # workload's requests it holds at once: shown when some layout has it.
    kv = any(_known(r.get("kv_tokens")) for r in rows_in)
    rows = []
    for r in rows_in:
        cid = quote(str(r["config_id"]), safe="")
        rows.append([escape(str(r["layout"])), escape(str(r["config_id"])),
                     *([escape(_plain(r["cluster"]))] if pooled else []),
                     num(r["mem_peak_mib"], 0, " MiB"), num(r["mem_total_mib"], 0, " MiB"),
                     num(r["mem_headroom_mib"], 0, " MiB"),
                     *([num(r.get("kv_tokens"), 0, ""), num(r.get("kv_requests"), 0, "")]
                       if kv else []),
                     escape(f"{_plain(r['mem_worst_node'])} / GPU {_plain(r['mem_worst_gpu'])}"),
                     num(r["boot_s"], 0, " s"),
                     " ".join(_link(data.run_dir, f"{sub}/{cid}/", sub)
                              for sub in (SERVICE_DIR, RAW_DIR, GPU_DIR))])
    headers = ["PP / TP / EP", "Config", *(["Cluster"] if pooled else []), "Worst-rank peak",
               "GPU total", "Headroom",
               *(["KV cache (tokens)", "Requests the KV holds"] if kv else []),
               "Worst node / GPU", "Startup", "Evidence"]
    return "<h3>GPU memory (worst rank) and startup time</h3>" + _table(
        headers, rows, 3 if pooled else 2, wrap=(len(headers) - 3, len(headers) - 1)
    )


def _known(value: Any) -> bool:
    """A number that is there: not None, not NaN, not an empty cell."""
    try:
        return not math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def _plain(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "?"
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _verdicts(verdicts: Sequence[Verdict], answers: Sequence[Answer] = ()) -> str:
    """The verdict of every point; a failure the sweep expected ([[expect]]) says so."""
    valid = sum(v.valid for v in verdicts)
    expected = expected_failures(answers)
    items = "".join(f'<li class="{_verdict_class(v, expected)}">'
                    f"{escape(v.config_id)} C={v.concurrency}: "
                    + (f"{escape(expected[v.config_id])}; " if not v.valid and v.config_id in
                       expected else "") + f"{escape(v.text)}</li>" for v in verdicts)
    return f"<h3>Verdicts ({valid}/{len(verdicts)} valid)</h3><ul>{items}</ul>"


def _verdict_class(v: Verdict, expected: dict[str, str]) -> str:
    return "ok" if v.valid else "expected" if v.config_id in expected else "bad"


def _pct_vs(value: Any, reference: Any) -> float:
    try:
        return (float(value) / float(reference) - 1.0) * 100.0
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan


def _signed(pct: float, higher_is_better: bool) -> str:
    """A delta in % coloured by whether it is better (green) or worse (red) for the metric."""
    text = delta(pct)
    if text == "n/a" or abs(pct) < 0.005:
        return text
    good = (pct > 0) == higher_is_better
    return f'<span class="{"better" if good else "worse"}">{text}</span>'


def _answer_delta(rec: Answer | None, primary: str, versus: str, conc: int, metric: str
                  ) -> float | None:
    """The Δ % of ``primary`` vs ``versus`` at ``conc`` on ``metric`` as the answer's evidence
    states it (the decision's own computation: the ratio of geometric means), None when the
    answer did not compare them."""
    for e in rec.evidence if rec is not None else ():
        if e.concurrency != conc or e.metric != metric or math.isnan(e.delta_pct):
            continue
        if (e.point, e.versus) == (primary, versus):
            return e.delta_pct
        if (e.point, e.versus) == (versus, primary) and e.delta_pct > -100.0:
            return (100.0 / (100.0 + e.delta_pct) - 1.0) * 100.0
    return None


def _decision_table(summary: Summary, primary: str, versus: Sequence[tuple[str, str]],
                    rec: Answer | None = None) -> str:
    """Per C: the primary's Input TPS and TTFT p50, each with its delta vs every reference: the
    answer's own Δ where it compared the two (so the box and the Answers print one number),
    else the ratio of the medians shown."""
    table = {(str(r["config_id"]), int(r["concurrency"])): r for r in records(summary.table)}

    def delta(cid: str, conc: int, metric: str, ref: dict[str, Any]) -> float:
        found = _answer_delta(rec, primary, cid, conc, metric)
        mine = table.get((primary, conc), {})
        return found if found is not None else _pct_vs(mine.get(metric), ref.get(metric))

    headers = ["C", "Input TPS", *(f"vs {escape(label)}" for label, _ in versus),
               "TTFT p50", *(f"vs {escape(label)}" for label, _ in versus)]
    rows = []
    for conc in summary.concurrencies:
        mine = table.get((primary, conc), {})
        refs = [table.get((cid, conc), {}) for _, cid in versus]
        rows.append([str(conc), num(mine.get("input_tps")),
                     *(_signed(delta(cid, conc, "input_tps", r), True)
                       for (_, cid), r in zip(versus, refs, strict=True)),
                     num(mine.get("ttft_p50_s"), 2, " s"),
                     *(_signed(delta(cid, conc, "ttft_p50_s", r), False)
                       for (_, cid), r in zip(versus, refs, strict=True))])
    return _table(headers, rows, 0)


def _trust(data: RunData, summary: Summary, verdicts: Sequence[Verdict], primary: str) -> str:
    """Whether the recommendation can be trusted: verdicts, spread, worst-rank memory."""
    mine = [v for v in verdicts if v.config_id == primary]
    valid = sum(v.valid for v in verdicts)
    rows = [r for r in records(summary.table) if r["config_id"] == primary]
    spreads = [float(r["tps_spread_pct"]) for r in rows if num(r["tps_spread_pct"]) != "n/a"]
    ttft = [float(r["ttft_p50_spread_pct"]) for r in rows
            if num(r["ttft_p50_spread_pct"]) != "n/a"]
    repeats = sorted({int(r["repeats"]) for r in rows})
    limit = data.meta.spread_threshold * 100.0
    items = [f"Verdicts: {primary} VALID at "
             f"{'every' if all(v.valid for v in mine) else 'not every'} C "
             f"({sum(v.valid for v in mine)}/{len(mine)}); {valid}/{len(verdicts)} points of "
             "the run valid.",
             f"Spread over {'/'.join(map(str, repeats)) or '?'} repeats: Input TPS at most "
             f"{num(max(spreads) if spreads else math.nan, 2, ' %')} (limit "
             f"{num(limit, 1, ' %')}), TTFT p50 at most "
             f"{num(max(ttft) if ttft else math.nan, 2, ' %')}."]
    config = next((c for c in records(summary.configs) if c["config_id"] == primary), None)
    if config is not None:
        headroom, total = config.get("mem_headroom_mib"), config.get("mem_total_mib")
        share = _pct_vs(headroom, total) + 100.0
        items.append(f"Worst-rank GPU memory headroom: {num(headroom, 0, ' MiB')} of "
                     f"{num(total, 0, ' MiB')} ({num(share, 1, ' %')}) on "
                     f"{_plain(config.get('mem_worst_node'))} / GPU "
                     f"{_plain(config.get('mem_worst_gpu'))}.")
    return '<ul class="trust">' + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>"


def _data(rec: Answer | None) -> str:
    if rec is None:
        return ""
    return f' data-kind="{escape(rec.kind)}" data-status="{escape(rec.status)}"'


def _headline(answers: Sequence[Answer]) -> Answer | None:
    """The answer the decision box shows: the SLO question's when the sweep states an SLO (it
    is the question the sweep asks first), else the first layout question's, else the
    first."""
    return next((a for a in answers if a.kind == SLO_KIND),
                next((a for a in answers if a.kind == "layout"), answers[0] if answers else None))


# What the box says of an answer that decided nothing, by its status, and the box's colour:
# "open" (amber) where measuring more may decide, "none" (red) where nothing can be used.
_UNDECIDED = {
    INCONCLUSIVE: ("No layout decided: inconclusive", "open"),
    DECIDED_ONE_BOOT: ("Leads within one boot: {answer} (a boot offset could reverse it)",
                       "open"),
    EQUIVALENT: ("No single layout: {equivalent} are equivalent", "open"),
    MEASURED: ("Measured, not compared: {answer}", "open"),
    NO_VALID_POINT: ("No layout recommended: no valid point", "none"),
    RUNNING: ("Running: nothing decided yet", "open"),
    INTERRUPTED: ("Interrupted: nothing decided", "none"),
    PARTIAL: ("Partial run: nothing decided about the whole question", "open"),
    NO_LAYOUT: ("Not met: no layout meets {slo}", "none notmet"),
}


def _run_status(data: RunData) -> str:
    """The run's status in the box: ``Run status: COMPLETE, 5 of 5 layouts measured`` (and
    while it runs, what it is doing; unless complete, the command that resumes it)."""
    status = data.meta.status
    if status is None:
        return ""
    lines = status.lines()
    rest = "".join(f"<br>{escape(line)}" for line in lines[1:])
    # a closed run's line names the points not measured (and those that failed as expected)
    head = status.headline() if status.status == RUNNING else lines[0].removeprefix(
        "run status: ")
    return (f'<p class="runstatus" data-run-status="{escape(status.status)}">'
            f"Run status: <b>{escape(head)}</b>{rest}</p>")


def _undecided(data: RunData, rec: Answer | None, valid: int, judged: int) -> str:
    """The box of an answer that decided nothing, named by its real status."""
    if rec is None:
        use, colour = "No layout recommended", "none"
        why = f"No question could be answered ({valid}/{judged} points valid)."
    else:
        template, colour = _UNDECIDED.get(rec.status, (f"{rec.status}", "open"))
        before = str(rec.extra.get("leader") or "")
        same = rec.extra.get("equivalent") or rec.ranking[:2]
        use = template.format(answer=rec.answer or before or "",
                              equivalent=" = ".join(str(p) for p in same),
                              slo=rec.extra.get("slo") or "the SLO").rstrip(": ")
        own = str(rec.extra.get("text") or "").strip()
        why = own or (rec.reasons[0] if rec.reasons else "")
        if rec.status == DECIDED_ONE_BOOT:
            why = next((r for r in rec.reasons if r.startswith(ONE_BOOT_NOTE)), why)
        if rec.kind != SLO_KIND:
            why = why.rstrip(".") + f" ({valid}/{judged} points valid)."
    rerun = (f'<p class="rerun">Rerun: <code>{escape(rec.rerun)}</code></p>'
             if rec is not None and rec.rerun else "")
    near = _closest_table(rec) if rec is not None and rec.status == NO_LAYOUT else ""
    return (f'<div class="ppsweep-decision {colour}"{_data(rec)}><p class="use">{escape(use)}</p>'
            f"<p>{escape(why)}</p>{near}{rerun}{_run_status(data)}</div>")


def _closest_table(rec: Answer) -> str:
    """The SLO not met: how close each layout came (results/sloanswer.distances)."""
    rows = [d for d in rec.extra.get("closest") or () if isinstance(d, dict)]
    if not rows:
        return ""
    body = "".join(
        f'<tr><td class="l">{escape(str(d.get("layout")))}</td><td>{escape(str(d.get("load")))}'
        f'</td><td class="l">{escape(str(d.get("limit")))}</td>'
        f"<td>{float(d['measured_s']):.3g} s</td>"
        f"<td>{escape(over_text(float(d['measured_s']), float(d['limit_s'])))}</td></tr>"
        for d in rows)
    return ('<table class="closest"><thead><tr><th class="l">layout</th><th>lowest load</th>'
            '<th class="l">limit</th><th>measured</th><th>distance to the limit</th></tr>'
            f"</thead><tbody>{body}</tbody></table>")


def _wrong_image(data: RunData, rec: Answer | None) -> str:
    """The red box of a gated run whose image computes wrong outputs or task scores against
    the reference run (gate.csv's correctness rows): no layout of it is recommended, whatever
    the answers found among its layouts; "" when the gate found none."""
    try:
        rows = read_comparison_csv(data.run_dir)
    except (OSError, KeyError, ValueError):
        return ""
    line = wrong_image_line(rows)
    if not line:
        return ""
    items = "".join(f"<li>{escape(c.message)}</li>" for c in correctness_failures(rows)[:5])
    return (f'<div class="ppsweep-decision none" data-gate="fail"{_data(rec)}>'
            '<p class="use">Do not use this image: it failed the gate on correctness</p>'
            f'<p>{escape(line)}</p><ul class="wrong">{items}</ul>{_run_status(data)}</div>')


def _slo_decision(data: RunData, rec: Answer) -> str:
    """The SLO question decided: which layout carries the most within the SLO, and how much."""
    text = str(rec.extra.get("text") or "")
    return (f'<div class="ppsweep-decision"{_data(rec)}><p class="use">Within '
            f"{escape(str(rec.extra.get('slo') or 'the SLO'))}: use <b>{escape(str(rec.answer))}"
            f"</b></p><p>{escape(text)}</p>"
            + (f'<p class="fallback">Fallback: <b>{escape(rec.fallback)}</b>, ranked second.</p>'
               if rec.fallback else "") + f"{_run_status(data)}</div>")


def _decision(data: RunData, summary: Summary, verdicts: Sequence[Verdict],
              answers: Sequence[Answer]) -> str:
    """The first screen's answer to the sweep's first question (the SLO's, else the layout
    question's), unless the gate found the image computes wrong answers (then that, in red):
    which layout, by how much vs the baseline and the runner-up, whether it can
    be trusted, and the fallback; or, when nothing was decided, why, named by the answer's
    real status; and the run's status."""
    layouts = {str(c["config_id"]): str(c["layout"]) for c in records(summary.configs)}
    valid = sum(v.valid for v in verdicts)
    rec = _headline(answers)
    wrong = _wrong_image(data, rec)
    if wrong:
        return wrong
    if rec is None or rec.status != DECIDED or rec.answer is None:
        return _undecided(data, rec, valid, len(verdicts))
    if rec.kind == SLO_KIND:
        return _slo_decision(data, rec)
    primary = rec.answer
    versus = []
    if summary.baseline and summary.baseline != primary and any(
            r["config_id"] == summary.baseline for r in records(summary.table)):
        trusted = all(v.valid for v in verdicts if v.config_id == summary.baseline)
        versus.append((f"baseline {summary.baseline}" + ("" if trusted else " (INVALID)"),
                       summary.baseline))
    if rec.fallback and rec.fallback != summary.baseline:
        versus.append((f"runner-up {rec.fallback}", rec.fallback))
    base_note = (" (it is the baseline)" if summary.baseline == primary else "")
    head = (f'<p class="use">Use <b>{escape(layouts.get(primary, primary))}</b> '
            f"(PP / TP / EP) &mdash; <code>{escape(primary)}</code>{escape(base_note)}</p>")
    fallback = (f"Fallback: <b>{escape(rec.fallback)}</b> "
                f"({escape(layouts.get(rec.fallback, rec.fallback))}), ranked second."
                if rec.fallback else "Fallback: none (no other valid point).")
    rule = next((r.removeprefix("Rule: ").rstrip(".") for r in rec.reasons
                 if r.startswith("Rule: ")), "")
    lead = (f"Decided among {len(rec.ranking)} valid layout(s) by the decision rule on this "
            "run's repeats" + (f" ({rule})" if rule else "")
            + (f"; excluded: {', '.join(p for p, _ in rec.excluded)}" if rec.excluded else "")
            + ". Δ as in the Answers: the ratio of the geometric means of the repeats.")
    return (f'<div class="ppsweep-decision"{_data(rec)}>' + head + f"<p>{escape(lead)}</p>"
            + _decision_table(summary, primary, versus, rec)
            + _trust(data, summary, verdicts, primary)
            + f'<p class="fallback">{fallback}</p>{_run_status(data)}</div>')


def _charts(summary: Summary) -> str:
    configs = records(summary.configs)
    ids = [str(c["config_id"]) for c in configs]
    names = [str(c["layout"]) for c in configs]
    table = {(str(r["config_id"]), int(r["concurrency"])): r for r in records(summary.table)}

    def series(column: str) -> list[tuple[str, list[float]]]:
        return [(f"C={c}", [float(table[(i, c)][column]) if (i, c) in table else math.nan
                            for i in ids]) for c in summary.concurrencies]

    spreads = [(f"C={c}", [Spread(*(float(table[(i, c)][k]) for k in (
        "ttft_p50_min_s", "ttft_p50_s", "ttft_p50_max_s", "ttft_p95_s", "ttft_p99_s")))
        if (i, c) in table else None for i in ids]) for c in summary.concurrencies]
    totals = [float(c["mem_total_mib"]) for c in configs if num(c["mem_total_mib"]) != "n/a"]
    svgs = [bar_chart("Input TPS per layout", names, series("input_tps"), "tokens/s"),
            bar_chart("TTFT p50 per layout", names, series("ttft_p50_s"), "s"),
            spread_chart("TTFT distribution per layout", names, spreads, "s"),
            bar_chart("Worst-rank GPU memory per layout", names,
                      [("peak", [float(c["mem_peak_mib"]) for c in configs])], "MiB",
                      limit=min(totals) if totals else None,
                      limit_label=f"capacity {min(totals):,.0f} MiB" if totals else ""),
            # On its own axis: a few GiB of headroom next to an 85 GiB capacity is a sliver.
            bar_chart("Worst-rank GPU memory headroom per layout", names,
                      [("headroom", [float(c["mem_headroom_mib"]) for c in configs])], "MiB")]
    note = ("<p>TTFT distribution: box from median p50 to median p95, whisker to median p99, "
            "ticks at the lowest, median and highest per-repeat p50.</p>")
    return '<h3>Charts</h3><div class="charts">' + "".join(svgs) + "</div>" + note


def html_summary(data: RunData, summary: Summary, verdicts: Sequence[Verdict],
                 answers: Sequence[Answer], files: FolderFiles | None = None) -> list[str]:
    """HTML fragments for ``pytest_html_results_summary`` (extend ``prefix`` or ``summary``).
    Links are relative to the run folder, where report.html lives. ``files``: the folder's
    other files the views show, read once (the analysis's, else read here)."""
    files = files or data.files or FolderFiles.of(data.run_dir)
    by_key = {(v.config_id, v.concurrency): v for v in verdicts}
    evidence = " | ".join(_link(data.run_dir, target) for target in EVIDENCE)
    # The first screen answers the question (which layout, by how much, can it be trusted);
    # the tables, charts and evidence that back the answer come after it.
    body = [sloview.html_section(files), *_axis_sections(data, summary),
            reasons_html(answers), _medians(summary, by_key), energy_html(summary),
            _charts(summary),
            accuracyview.html_section(files),
            trendview.html_section(data.run_dir, str(files.meta.get(RunKey.SWEEP) or ""),
                                   data.meta.run_id),
            profile_section(files.attributions, data.meta.baseline, data.meta.order),
            comm_html(files),
            _memory(data, summary), _steps(summary), _comparisons(summary),
            _verdicts(verdicts, answers), _metadata(data),
            plannerview.html_section(files),
            f"<h3>Evidence</h3><p>{evidence}</p>"]
    # The banner and the answers lead; in pytest-html's page, report.answers.lift moves them
    # above its own title and environment once the page is written.
    first = _headline(answers)
    decision = _decision(data, summary, verdicts, answers)
    return [_STYLE, html_block(answers, _banner(data), decision, first),
            '<div class="ppsweep"><h2>PP/TP/EP sweep</h2>', *body, "</div>"]


def _axis_sections(data: RunData, summary: Summary) -> list[str]:
    """An axis sweep's tables with memory headroom per variant (first screen, axisview.py)."""
    from pytest_ppsweep.report.axisview import axis_sweep_html

    return [s for s in (axis_sweep_html(data.run_json, summary.table, summary.configs),) if s]


def _comparisons(summary: Summary) -> str:
    """Every comparison with its differing fields and confounded mark (report/axisview.py), after
    the step-to-step deltas it explains."""
    from pytest_ppsweep.report.axisview import comparisons_html

    return comparisons_html(summary.comparisons)


def live(data: RunData) -> bool:
    """Whether the analysed run is still running (its owner process alive: results/livestatus)."""
    return data.meta.status is not None and data.meta.status.status == RUNNING


def build_report(run_dir: Path) -> Path:
    """Rebuild summary.csv and a self-contained ``report-rebuilt.html`` from the run's files
    alone (no cluster, no pytest). Returns the HTML path."""
    return rebuild_report(run_dir)[0]


def rebuild_report(
    run_dir: Path,
) -> tuple[Path, Summary, tuple[Verdict, ...], list[Answer]]:
    """:func:`build_report`, also returning what it computed (for the terminal summary). A run
    that is still running keeps its summary.csv and answers.json to itself (it writes them at its
    close): only report-rebuilt.html is written, its status box saying that the run is running."""
    data, summary, verdicts, rec = analyse(Path(run_dir))
    if not live(data):
        save(data, summary, rec)
    title = escape(f"PP/TP/EP sweep {data.meta.run_id}")
    page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/>"
            f"<title>{title}</title></head><body style=\"font-family:sans-serif\">"
            + "\n".join(html_summary(data, summary, verdicts, rec)) + "</body></html>\n")
    path = data.run_dir / REBUILT_NAME
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return path, summary, verdicts, rec
