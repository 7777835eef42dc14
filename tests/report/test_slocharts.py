"""The SLO searches charted (report/slocharts.py): one chart per metric the SLO limits by a
percentile, a line per layout through the median of each load, the limit as a line; the
loads of a repeated final probe are one point."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from support.runs import seed_run

from pytest_ppsweep.report.slocharts import limits_by_metric, search_svg, section_html
from pytest_ppsweep.run.slo_search import PROBE_COLUMNS

SLO = {"limits": [{"metric": "ttft", "percentile": 50, "limit_s": 5.0},
                  {"metric": "ttft", "percentile": 99, "limit_s": 9.0},
                  {"metric": "tpot", "percentile": 99, "limit_s": 0.2},
                  {"metric": "ttft", "percentile": None, "limit_s": 12.0}]}
# (layout, load, TTFT p50, TTFT p99, within)
PROBES = [("pp8", 1.0, 2.0, 3.0, True), ("pp8", 3.0, 7.0, 9.5, False),
          ("pp8", 2.0, 4.0, 6.0, True), ("pp8", 2.0, 4.4, 6.2, True), ("pp4", 1.0, 3.0, 4.0, True)]


def write_probes(run: Path) -> list[dict[str, str]]:
    rows = [{"config_id": cid, "workload": "default", "search": "rate", "load": str(load),
             "ttft_p50_s": str(p50), "ttft_p99_s": str(p99), "tpot_p50_s": "0.05",
             "tpot_p99_s": "0.1", "within": str(within)} for cid, load, p50, p99, within in PROBES]
    with (run / "slo_probes.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=PROBE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def test_one_chart_per_limited_metric_with_its_limits_as_lines(tmp_path: Path) -> None:
    run = seed_run(tmp_path / "run", workload={"output_len": 8, "slo": SLO})
    write_probes(run)
    assert limits_by_metric(run) == {"ttft": [(50, 5.0), (99, 9.0)], "tpot": [(99, 0.2)]}
    html = section_html(run)
    charts = re.findall(r'<svg[^>]*class="ppsweep-chart ppsweep-slo-search"[^>]*'
                        r'data-metric="(\w+)"', html)
    assert charts == ["ttft", "tpot"]
    ttft = html[:html.index('data-metric="tpot"')]
    assert ttft.count('class="slo-line"') == 2
    assert "SLO: TTFT p50 ≤ 5 s" in ttft and "SLO: TTFT p99 ≤ 9 s" in ttft


def test_a_line_per_layout_through_the_median_at_each_load(tmp_path: Path) -> None:
    run = seed_run(tmp_path / "run", workload={"output_len": 1, "slo": SLO})
    rows = write_probes(run)
    svg = search_svg(rows, "ttft", [(50, 5.0)], "req/s")
    lines = dict(re.findall(r'<polyline class="p50" data-layout="([^"]+)" points="([^"]+)"', svg))
    assert set(lines) == {"pp8", "pp4"}
    assert len(lines["pp8"].split()) == 3 and len(lines["pp4"].split()) == 1  # 1, 2, 3 req/s
    assert "pp8 at 2 req/s: TTFT p50 4.2 s, TTFT p99 6.1 s, within the SLO" in svg  # medians
    assert svg.count('class="probe"') == 4 and svg.count('fill="#fff" stroke=') >= 1  # 3 outside
    assert section_html(tmp_path) == ""  # no probe, no chart
