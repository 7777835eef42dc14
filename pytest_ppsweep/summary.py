"""Glue between the run folder and what the plugin shows: HTML summary, terminal, table columns."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TABLE_HEADER = [
    '<th class="sortable" data-column-type="config">Configuration</th>',
    '<th class="sortable" data-column-type="c">C</th>',
    '<th class="sortable" data-column-type="tps">Input TPS</th>',
    '<th class="sortable" data-column-type="ttft">TTFT p50 (s)</th>',
]


def table_row(props: dict[str, Any]) -> list[str]:
    def cell(col: str, value: Any) -> str:
        text = (
            "" if value is None else (f"{value:,.2f}" if isinstance(value, float) else str(value))
        )
        return f'<td class="col-{col}">{html.escape(text)}</td>'

    return [
        cell("config", props.get("ppsweep_config")),
        cell("c", props.get("concurrency")),
        cell("tps", props.get("input_tps")),
        cell("ttft", props.get("ttft_p50_s")),
    ]


@dataclass
class Rendered:
    html: list[str] = field(default_factory=list)
    terminal: list[str] = field(default_factory=list)


def render(run_dir: Path) -> Rendered:
    import pandas as pd

    results = run_dir / "results.csv"
    if not results.exists():
        return Rendered([], ["no round finished"])
    df = pd.read_csv(results)
    med = df.groupby(["config_id", "concurrency"], sort=False)[["input_tps", "ttft_p50_s"]].median()
    lines = [
        f"{cid:<16} C={c:<4} TPS {r.input_tps:>10,.2f}  TTFT p50 {r.ttft_p50_s:>8.2f} s"
        for (cid, c), r in med.iterrows()
    ]
    return Rendered([f"<pre>{html.escape(chr(10).join(lines))}</pre>"], lines)
