"""Energy per token in the summaries: per point (layout x C) the medians over its rounds of GPU
board energy per total, output and input token and per request (results/aggregate.py
ENERGY_MEDIANS), the method that measured it, and where a point has no valid figure the reasons
instead of a number. Every place it is shown says :data:`measure.energy.LABEL` ("GPU board
energy, not wall power")."""

from __future__ import annotations

import html
import math
from typing import Any

from pytest_ppsweep.measure.energy import LABEL
from pytest_ppsweep.report.format import fit_table, num, records
from pytest_ppsweep.results.aggregate import Summary

__all__ = ["TITLES", "energy_html", "energy_lines", "energy_rows"]

TITLES = ("config", "C", "J/token", "J/out token", "J/in token", "J/request", "method")


def _value(v: Any) -> str:
    try:
        number = float(v)
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(number) else num(number, 4 if number < 1 else 2)


def energy_rows(summary: Summary) -> list[list[str]]:
    """One row per point of the summary that has energy columns (none for a run written before
    them): the four figures and the method, or blanks and ``absent: <reasons>``."""
    if "energy_j_per_total_token" not in summary.table.columns:
        return []
    out = []
    for r in records(summary.table):
        cells = [_value(r.get(c)) for c in ("energy_j_per_total_token",
                                            "energy_j_per_output_token",
                                            "energy_j_per_input_token", "energy_j_per_request")]
        reasons = str(r.get("energy_reasons") or "").replace(";", ", ")
        if not cells[0]:
            method = f"absent: {reasons or 'not measured'}"
        else:
            method = str(r.get("energy_method") or "")
            method += f" (some rounds not valid: {reasons})" if reasons else ""
        out.append([str(r["config_id"]), str(r["concurrency"]), *cells, method])
    return out


def energy_lines(summary: Summary, width: int = 100) -> list[str]:
    """The terminal's energy table under the medians tables; no lines when the run has none."""
    rows = energy_rows(summary)
    if not rows:
        return []
    body: list[list[str] | str] = list(rows)
    return [f"Energy per token, medians over rounds ({LABEL})",
            *fit_table(TITLES, body, width, align="<>>>>><")]


def energy_html(summary: Summary) -> str:
    """The HTML report's energy table with its label; empty when the run has none."""
    rows = energy_rows(summary)
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(t)}</th>" for t in TITLES)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return (f'<section id="energy"><h2>Energy per token</h2><p class="label">{LABEL}: the '
            "GPUs' boards as NVML counts them (no CPU, memory, fans, network or power-supply "
            "losses); medians over each point's rounds whose energy is valid.</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>")
