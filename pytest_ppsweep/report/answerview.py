"""The run's answers where users look: the terminal's **Answers** block (one short paragraph per
question, a small table for an axis question: value → booted / OOM, headroom, Δ objective) and
the HTML block that the report's first screen shows above pytest-html's own sections."""

from __future__ import annotations

import math
import os
import re
import textwrap
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from pytest_ppsweep.report.format import delta, fit_table, num
from pytest_ppsweep.results.answers import (
    DECIDED,
    DECIDED_ONE_BOOT,
    EQUIVALENT,
    INCONCLUSIVE,
    NO_VALID_POINT,
    ONE_BOOT_NOTE,
    ONE_LEVEL_NOTE,
    SINGLE_BOOT_NOTE,
    TWO_LEVEL_NOTE,
    Answer,
    Evidence,
)
from pytest_ppsweep.results.objective import label
from pytest_ppsweep.results.questions import NOISY_NOTE, PER_C_NOTE

BEGIN, END = "<!--ppsweep-answers-->", "<!--/ppsweep-answers-->"
_STYLE = """<style>
.ppsweep-answers{font-family:sans-serif;color:#111;max-width:1100px;margin:6px 0 12px}
.ppsweep-answers h2{margin:4px 0 6px}
.ppsweep-answer{border-left:5px solid #2a6;background:#f4fbf6;padding:6px 12px;margin:6px 0}
.ppsweep-answer.inconclusive{border-color:#c80;background:#fff8ea}
.ppsweep-answer.none{border-color:#b00;background:#fdf2f2}
.ppsweep-answer p{margin:3px 0}.ppsweep-answer .q{color:#444;font-size:13px}
.ppsweep-answer code{overflow-wrap:anywhere;white-space:pre-wrap}
.ppsweep-answer table{border-collapse:collapse;font-size:12px;margin:4px 0;max-width:100%}
.ppsweep-answer th,.ppsweep-answer td{border:1px solid #ccc;padding:2px 6px;text-align:right}
.ppsweep-answer th{background:#f2f2f2}.ppsweep-answer td.l,.ppsweep-answer th.l{text-align:left;
overflow-wrap:anywhere}.ppsweep-answer .oom{color:#a00;font-weight:bold}
</style>"""


def title(a: Answer) -> str:
    """``layout (prefill)`` / ``moe_a2a_backend on pp8-tp4-ep4 (decode)`` / ``slo: most load
    (default)``: a kind that asks two questions names each (``extra["aspect"]``)."""
    what = (f"{a.axis} on {a.layout}" if a.kind == "axis" and a.axis
            else "best point overall" if a.kind == "joint" else a.kind)
    aspect = a.extra.get("aspect")
    what += f": {aspect}" if aspect else ""
    return what + (f" ({a.workload})" if a.workload else "")


def _vs(a: Answer, rival: str | None) -> list[Evidence]:
    if a.answer is None or rival is None:
        return []
    return [e for e in a.evidence if e.point == a.answer and e.versus == rival
            and e.metric == a.objective[0]]


def _ev_text(ev: Sequence[Evidence]) -> str:
    return ", ".join(f"C={e.concurrency} {delta(e.delta_pct)} (noise {num(e.noise_pct, 2, ' %')})"
                     for e in ev)


def paragraph(a: Answer, rerun: bool = True) -> str:
    """One short paragraph: the status and answer, the evidence against the runner-up, what
    was excluded, the caveats and, when inconclusive and ``rerun``, the command that would
    decide (the terminal puts it on a line of its own)."""
    objective = ", then ".join(label(m) for m in a.objective)
    own = str(a.extra.get("text", "")).strip()  # a kind that states its answer (the SLO's)
    if own and a.status in (DECIDED, INCONCLUSIVE):
        head = f"{a.status.upper()}: {own}"
    elif a.status in (DECIDED, DECIDED_ONE_BOOT):
        head = f"{a.status.upper()}: {a.answer}"
        if a.kind == "axis" and "value" in a.extra:
            head += f" ({a.axis} = {_shown(a.extra['value'])})"
        head += (f", fallback {a.fallback}" if a.fallback else "") + f" (by {objective})."
        ev = _vs(a, a.fallback)
        tied = bool(a.reasons) and "tie-break" in a.reasons[0]
        if ev:
            head += f" {label(a.objective[0])} vs {a.fallback}: {_ev_text(ev)}."
        if tied or (not ev and a.reasons):
            head += " " + a.reasons[0]
        if a.status == DECIDED_ONE_BOOT:
            head += " " + next((r for r in a.reasons if r.startswith(ONE_BOOT_NOTE)),
                               "")
        if tied and len(a.objective) > 1:
            tie = [e for e in a.evidence if e.point == a.answer and e.versus == a.fallback
                   and e.metric == a.objective[1]]
            if tie:
                head += f" {label(a.objective[1])} vs {a.fallback}: {_ev_text(tie)}."
    elif a.status == INCONCLUSIVE:
        head = (f"INCONCLUSIVE between {', '.join(_unseparated(a))} (by {objective}): "
                "the data cannot separate them.")
    elif a.status == NO_VALID_POINT:
        head = "NO VALID POINT."
    else:  # a kind's own status (the SLO question's "no layout meets the SLO"), with its text
        head = f"{a.status.upper()}." + (f" {own}" if own else "")
    parts = [head]
    if a.extra.get("holds_for"):  # a trace or shared-prefix workload: what the answer is of
        parts.append(f"Holds for {a.extra['holds_for']}.")
    noisy = [r for r in a.reasons if r.startswith(NOISY_NOTE)]
    parts += noisy
    parts += [r for r in a.reasons if r.startswith(PER_C_NOTE)]
    if a.status in (DECIDED, DECIDED_ONE_BOOT, EQUIVALENT, INCONCLUSIVE):  # its level
        parts += [r for r in a.reasons
                  if r.startswith((SINGLE_BOOT_NOTE, TWO_LEVEL_NOTE, ONE_LEVEL_NOTE))]
    if a.excluded:
        parts.append("Excluded: " + "; ".join(f"{p} ({w})" for p, w in a.excluded) + ".")
    parts += [f"Caveat: {c}" for c in a.caveats]
    if a.rerun and rerun:
        parts.append(f"Rerun: {a.rerun}")
    return " ".join(parts)


def _unseparated(a: Answer) -> list[str]:
    for r in a.reasons:
        m = re.match(r"The data cannot separate (.*)\.$", r)
        if m:
            return m.group(1).split(", ")
    return list(a.ranking[:2])


def _shown(value: Any) -> str:
    return "unset" if value is None else str(value)


def _concs(a: Answer) -> list[str]:
    return sorted({c for row in a.table for c in (row.get("delta_pct") or {})}, key=int)


def _state(row: dict[str, Any]) -> str:
    return str(row.get("state") or "")


def table_lines(a: Answer, width: int = 100) -> list[str]:
    """An axis answer's table: value, point, booted / OOM, headroom, Δ primary per C, verdict."""
    if not a.table:
        return []
    concs = _concs(a)
    titles = [str(a.axis or "value"), "point", "state", "headroom",
              *(f"Δ C={c}" for c in concs), "verdict"]
    rows: list[Sequence[str] | str] = []
    base = ""
    for r in a.table:
        room = r.get("headroom_mib")
        deltas = r.get("delta_pct") or {}
        if r.get("verdict") == "baseline":
            base = str(r.get("point"))
        rows.append([
            _shown(r.get("value")), str(r.get("point")), _state(r),
            num(room, 0, " MiB") if room is not None else "n/a",
            *("base" if r.get("verdict") == "baseline" else delta(deltas.get(c, math.nan))
              for c in concs),
            str(r.get("verdict"))])
    # nothing is cut: a table wider than the terminal wraps (report/format.fit_table)
    lines = fit_table(titles, rows, width, align="<<<>" + ">" * len(concs) + "<",
                      indent="    ", key=2)
    metric = label(a.objective[0]) if a.objective else "the objective"
    vs = f"the base row ({base})" if base else "the base row"
    legend = (f"(Δ C=n: % change of {metric} at concurrency n vs {vs}; headroom: GPU memory "
              "left on the worst rank)")
    return lines + textwrap.wrap(legend, width, initial_indent="    ",
                                 subsequent_indent="      ", break_on_hyphens=False)


def terminal_lines(answers: Sequence[Answer], width: int = 100) -> list[str]:
    """The **Answers** block of the terminal summary."""
    if not answers:
        return []
    lines = ["Answers"]
    for a in answers:
        lines += _wrap(f"[{title(a)}] {paragraph(a, rerun=False)}", width)
        if a.rerun:  # on its own line, whole, to be copied (a path is never split)
            lines.append(f"      Rerun: {a.rerun}")
        lines += table_lines(a, width)
    return lines


def _wrap(text: str, width: int) -> list[str]:
    glued = textwrap.wrap(text.replace(" %", "\x00%").replace(" MiB", "\x00MiB"), width,
                          initial_indent="  ", subsequent_indent="      ",
                          break_on_hyphens=False)
    return [line.replace("\x00", " ") for line in glued]


def _row_html(r: dict[str, Any], concs: Sequence[str]) -> str:
    state = _state(r)
    cls = ' class="l oom"' if state in ("OOM", "boot failed") else ' class="l"'
    room = r.get("headroom_mib")
    cells = "".join(
        f"<td>{'base' if r.get('verdict') == 'baseline' else escape(delta((r.get('delta_pct') or {}).get(c, math.nan)))}</td>"  # noqa: E501
        for c in concs)
    return (f'<tr><td class="l">{escape(_shown(r.get("value")))}</td>'
            f'<td class="l">{escape(str(r.get("point")))}</td><td{cls}>{escape(state)}</td>'
            f"<td>{escape(num(room, 0, ' MiB') if room is not None else 'n/a')}</td>{cells}"
            f'<td class="l">{escape(str(r.get("verdict")))}</td></tr>')


def _table_html(a: Answer) -> str:
    if not a.table:
        return ""
    concs = _concs(a)
    metric = label(a.objective[0])
    head = (f'<th class="l">{escape(str(a.axis))}</th><th class="l">point</th>'
            '<th class="l">booted</th><th>headroom</th>'
            + "".join(f"<th>Δ {escape(metric)} C={escape(c)}</th>" for c in concs)
            + '<th class="l">vs baseline</th>')
    body = "".join(_row_html(r, concs) for r in a.table)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_block(answers: Sequence[Answer], banner: str = "", headline: str = "",
               first: Answer | None = None) -> str:
    """The answers for the report's first screen (after ``banner``), between markers that
    :func:`lift` finds. ``headline``: the rich box shown for ``first`` instead of its
    paragraph (report/html.py's decision box)."""
    items = [headline] if headline else []
    for a in answers:
        if a is first and headline:
            continue
        cls = {DECIDED: "", INCONCLUSIVE: " inconclusive",
               DECIDED_ONE_BOOT: " inconclusive"}.get(a.status, " none")
        items.append(f'<div class="ppsweep-answer{cls}" data-kind="{escape(a.kind)}" '
                     f'data-status="{escape(a.status)}">'
                     f"<p><b>{escape(title(a))}</b> <span class=\"q\">{escape(a.question)}</span>"
                     f"</p><p>{escape(paragraph(a))}</p>{_table_html(a)}</div>")
    if not items:
        return f"{BEGIN}{banner}{END}" if banner else ""
    return (f'{BEGIN}{banner}<div id="ppsweep-answers" class="ppsweep-answers">{_STYLE}'
            f"<h2>Answers</h2>{''.join(items)}</div>{END}")


def lift(report: Path) -> bool:
    """Move the answers block of a written pytest-html report to the top of its body, above
    pytest-html's title, environment and summary (they are written in that order by its
    template). Returns whether the file was changed."""
    path = Path(report)
    try:
        page = path.read_text(encoding="utf-8")
    except OSError:
        return False
    start, end = page.find(BEGIN), page.find(END)
    body = page.find("<body>")
    if start < 0 or end < start or body < 0 or start < body:
        return False
    block = page[start:end + len(END)]
    first = body + len("<body>")
    if page[first:].lstrip().startswith(BEGIN):
        return False
    page = page[:first] + block + page[first:start] + page[end + len(END):]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return True


def reasons_html(answers: Sequence[Answer]) -> str:
    """Every answer's full reasoning and each comparison behind it (delta, noise, verdict),
    after the medians' first screen."""
    if not answers:
        return ""
    parts = ["<h3>Reasons and evidence</h3>"]
    for a in answers:
        items = "".join(f"<li>{escape(r)}</li>" for r in (*a.reasons, *a.caveats))
        rows = "".join(
            f'<tr><td class="l">{escape(e.point)}</td><td class="l">{escape(e.versus)}</td>'
            f"<td>{e.concurrency}</td><td class=\"l\">{escape(label(e.metric))}</td>"
            f"<td>{escape(delta(e.delta_pct))}</td><td>{escape(num(e.noise_pct, 2, ' %'))}</td>"
            f'<td class="l">{escape(e.verdict)}</td></tr>' for e in a.evidence)
        table = ('<table><thead><tr><th class="l">point</th><th class="l">versus</th><th>C</th>'
                 '<th class="l">metric</th><th>delta</th><th>noise</th><th class="l">verdict'
                 f"</th></tr></thead><tbody>{rows}</tbody></table>" if rows else "")
        parts.append(f"<h4>{escape(title(a))}: {escape(a.status)}</h4><ul>{items}</ul>{table}")
    return "".join(parts)
