"""The report's "Communication: all-reduce per TP domain (§9.2)" section: the seeds' table
(domain, topology label, latency and busbw at 128 MiB, mean busbw over 128/256 MiB) and a
busbw-vs-size chart with one line per domain, from the run folder's comm.csv."""

from __future__ import annotations

from html import escape
from typing import Any

from pytest_ppsweep.comm.smiq import node_line
from pytest_ppsweep.comm.table import curves, summary_rows
from pytest_ppsweep.folder.runfolder import COMM_CSV, COMM_SUMMARY_CSV, FolderFiles, FolderSource
from pytest_ppsweep.report.charts import log2_line_chart
from pytest_ppsweep.report.format import fit_table

__all__ = ["COMM_TITLE", "comm_html", "comm_rows", "comm_terminal", "smi_lines"]

COMM_TITLE = "Communication: all-reduce per TP domain (§9.2)"


def comm_rows(source: FolderSource) -> list[dict[str, Any]]:
    """comm.csv's rows ([] without one)."""
    return list(FolderFiles.of(source).comm)


def smi_lines(source: FolderSource) -> list[str]:
    """``node0: 1 × NVIDIA H200 (143771 MiB), driver …`` from the ``nvidia-smi -q`` the comm step
    saved (``comm/<layout>/smi-q-node<r>.txt``), one line per node (the first layout that has
    it); [] when none was saved."""
    return node_line(FolderFiles.of(source).smi)


def _cell(value: Any, digits: int = 2, unit: str = "") -> str:
    try:
        return f"{float(value):,.{digits}f}{unit}"
    except (TypeError, ValueError):
        return "n/a"


def _table_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    out = []
    for r in summary_rows(rows):
        domain = str(r["domain"]).split("-")[0].upper()
        out.append([str(r["config_id"]), domain, str(r["label"]),
                    _cell(r["latency_128m_ms"], 2, " ms"), _cell(r["busbw_128m_gbs"], 2, " GB/s"),
                    _cell(r["busbw_mean_128m_256m_gbs"], 2, " GB/s"),
                    _cell(r["busbw_max_gbs"], 2, " GB/s"), str(r["tool"])])
    return out


HEADERS = ["Layout", "Domain", "Topology", "128 MiB latency", "128 MiB busbw",
           "128/256 MiB mean busbw", "max busbw (sizes run)", "tool"]


def comm_html(source: FolderSource) -> str:
    """The section, or "" when the run has no comm.csv."""
    files = FolderFiles.of(source)
    rows = comm_rows(files)
    if not rows:
        return ""
    simulated = any(str(r.get("simulated")) == "True" for r in rows)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>"
                   for row in _table_rows(rows))
    head = "".join(f"<th>{escape(h)}</th>" for h in HEADERS)
    series = [(name, [(x, v) for x, v in pts]) for name, pts in curves(rows).items()]
    chart = log2_line_chart("all-reduce busbw vs size, one line per TP domain", series, "GB/s")
    note = ("<p>busbw = algbw × 2(n−1)/n (nccl-tests); latency is the mean over the timed "
            "iterations, averaged over the ranks; every sum was checked. "
            + ("SIMULATED: the emulator answers from its profile's bus bandwidths. "
               if simulated else "")
            + f'<a href="{COMM_CSV}">{COMM_CSV}</a> | '
            f'<a href="{COMM_SUMMARY_CSV}">{COMM_SUMMARY_CSV}'
            "</a> | comm/&lt;layout&gt;/ (node logs, topo -m, nvidia-smi -q)</p>")
    gpus = smi_lines(files)
    if gpus:
        note += ('<p class="ppsweep-comm-gpus">nvidia-smi -q: '
                 + "; ".join(escape(line) for line in gpus) + "</p>")
    return (f'<h3 id="ppsweep-comm">{escape(COMM_TITLE)}</h3><table class="ppsweep-table">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f'<div class="charts">{chart}</div>{note}')


def comm_terminal(source: FolderSource, width: int = 100) -> list[str]:
    """The table as text lines for the terminal summary ([] without comm.csv), within
    ``width``: wider, each row's layout and domain on a line and its values under it
    (report/format.fit_table)."""
    rows = comm_rows(source)
    if not rows:
        return []
    titles = HEADERS[:-2]
    return [COMM_TITLE, *fit_table(titles, [r[:-2] for r in _table_rows(rows)], width,
                                   align="<" * len(titles), key=2)]
