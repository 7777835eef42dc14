"""The report's planner section: predicted vs measured, from ``planner/plan.csv`` of the run
folder (written by the adaptive sweep at the end of its run, and by ``python -m pytest_ppsweep
fit RUN``). Every prediction is shown with its 90 % interval; layouts the adaptive sweep did
not boot read "predicted, not measured". Nothing when the run has no plan. A fit that cannot
reproduce its own measured points (``misfit`` in planner/profile.json, planner/trust.py) shows
"misfit", names the points, and no prediction.
"""

from __future__ import annotations

from html import escape

from pytest_ppsweep.folder.runfolder import FolderFiles, FolderSource
from pytest_ppsweep.report.format import fit_table, wrap_lines

__all__ = ["html_section", "terminal_lines"]

MISFIT = ("Planner: misfit. The fitted cost model cannot reproduce these measured points, so no "
          "prediction is shown:")


def _misfits(files: FolderFiles) -> list[str]:
    """The saved profile's ``misfit`` lines ([] when trusted, absent or unreadable)."""
    raw = files.planner_profile
    found = raw.get("misfit") if raw is not None else None
    return [str(x) for x in found] if isinstance(found, list) else []
HEADERS = ("Layout", "C", "Input TPS predicted [90 %]", "measured", "TTFT p50 s predicted "
           "[90 %]", "measured", "Worst-rank MiB [90 %]", "State")


def _band(row: dict[str, str], key: str, fmt: str) -> str:
    try:
        v, lo, hi = (float(row[f"{key}_{k}"]) for k in ("pred", "lo90", "hi90"))
    except (KeyError, ValueError):
        return "—"
    return f"{v:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def _measured(row: dict[str, str], key: str, fmt: str) -> str:
    raw = row.get(f"measured_{key}") or ""
    try:
        value = float(raw)
        lo, hi = float(row[f"{key}_lo90"]), float(row[f"{key}_hi90"])
    except (KeyError, ValueError):
        return "—"
    return f"{value:{fmt}} ({'inside' if lo <= value <= hi else 'OUTSIDE'})"


def _cells(row: dict[str, str]) -> list[str]:
    state = row.get("state", "") + (f" ({row['note']})" if row.get("note") else "")
    return [row.get("layout", ""), row.get("concurrency", ""),
            _band(row, "input_tps", ",.0f"), _measured(row, "input_tps", ",.0f"),
            _band(row, "ttft_p50_s", ".2f"), _measured(row, "ttft_p50_s", ".2f"),
            _band(row, "mem_peak_mib", ",.0f"), state]


def html_section(source: FolderSource) -> str:
    """The HTML section, or "" when the run folder has no plan."""
    files = FolderFiles.of(source)
    misfits = _misfits(files)
    if misfits:
        items = "".join(f"<li>{escape(m)}</li>" for m in misfits)
        return (f'<h3 id="ppsweep-planner">Planner: misfit</h3><p>{escape(MISFIT)}</p>'
                f'<ul class="ppsweep-misfit">{items}</ul>')
    rows = files.plan
    if not rows:
        return ""
    head = "".join(f"<th>{escape(h)}</th>" for h in HEADERS)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in _cells(r)) + "</tr>"
                   for r in rows)
    return ('<h3 id="ppsweep-planner">Planner: predicted vs measured</h3>'
            "<p>The planner's fitted cost model (planner/profile.json); each prediction with "
            "its 90 % interval, the measured median beside it where both exist.</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def terminal_lines(source: FolderSource, width: int = 100) -> list[str]:
    """The same table for the terminal summary ([] without a plan), within ``width``: wider,
    each row's layout and C on a line and its values under it (report/format.fit_table)."""
    files = FolderFiles.of(source)
    misfits = _misfits(files)
    if misfits:
        return wrap_lines([MISFIT, *(f"  misfit: {m}" for m in misfits)], width)
    rows = files.plan
    if not rows:
        return []
    return ["planner: predicted vs measured (90 % intervals)",
            *fit_table(HEADERS, [_cells(r) for r in rows], width, align="<" * len(HEADERS),
                       indent="  ", key=2)]
