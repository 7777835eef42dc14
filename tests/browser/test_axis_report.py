"""An axis sweep's report in real Chromium at 800 and 1280 px (issue 28 point 8): charts label
each variant, no legend or label overprints another, no title is clipped, each workload's table
shows its own metrics, the headroom chart is readable, and no table cell wraps a number.

One report for every check: the seeds' §10 sweep (two layouts × moe_a2a_backend
none/deepep/flashinfer, SGLang's EP rewrite) × a prefill and a decode workload, expanded by the
real sweep-file parser, its rounds written as the plugin writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from playwright.sync_api import Browser, Page
from support.browser import SCREEN_HEIGHT, open_report, overflow_problems
from support.runs import Point, config_row, rounds

from pytest_ppsweep.folder.runfolder import axis_fields
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.report.html import build_report

SWEEP = """
[sweep]
name = "kimi3-a2a"
model_path = "/data/hf_models/Kimi-K3"
ep_cap = 4
baseline = "pp8-tp4-ep4-prefill"

[server]
moe_a2a_backend = "none"

[[configs]]
pp = 8
tp = 4

[[configs]]
pp = 4
tp = 8

[axes]
moe_a2a_backend = ["none", "deepep", "flashinfer"]

[compare]
baseline = { moe_a2a_backend = "none" }

[workload]
num_requests = 40

[workloads.prefill]
input_len = 16384
output_len = 1
concurrency = [8, 16]

[workloads.decode]
input_len = 1024
output_len = 256
concurrency = [8, 16]

[clusters.local]
kind = "local"
hosts = ["127.0.6.1", "127.0.6.2", "127.0.6.3", "127.0.6.4"]
gpus_per_node = 8
"""
WIDTHS = (800, 1280)


@pytest.fixture(scope="module")
def axis_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("axis")
    (folder / "ppsweep.toml").write_text(SWEEP)
    sweep = load(folder / "ppsweep.toml")
    results: list[dict[str, Any]] = []
    configs = []
    for order, cfg in enumerate(sweep.configs):
        boost = 1.0 + 0.07 * order
        decode = cfg.workload == "decode"
        for c in (8, 16):
            point = Point(cfg.id, cfg.pp, cfg.tp, cfg.ep, c, 8800.0 * boost * c / 8,
                          13.5 * c / 8, 15.0 * c / 8)
            extra = ({"output_tps": 410.0 * boost * c / 8, "tpot_p50_s": 0.031 / boost,
                      "tpot_p99_s": 0.05, "itl_p50_s": 0.03} if decode else
                     {"output_tps": 2.5, "tpot_p50_s": float("nan")})
            results += rounds(point, run_id=folder.name, **extra)
        # a few GiB of headroom next to an 85 GiB capacity: the seeds' §8 scale
        configs.append(config_row(cfg.id, cfg.pp, cfg.tp, cfg.ep, order,
                                  85651 - 2000 - 900 * (order % 6)))
    run = folder / "kimi3-a2a-20261201-120000"
    (run / "metadata").mkdir(parents=True)
    for sub in ("service", "raw", "gpu"):
        (run / sub).mkdir()
    pd.DataFrame(results).to_csv(run / "results.csv", index=False)
    pd.DataFrame(configs).to_csv(run / "configs.csv", index=False)
    meta = {"run_id": run.name, "sweep": sweep.name, "baseline": sweep.baseline,
            "order": [c.id for c in sweep.configs], "simulated": True, "cluster": "local",
            "image": "local/sglang:kimi-k3", "matrix": str(folder / "ppsweep.toml"),
            "time_scale": 100.0, "spread_threshold": 0.02, "min_repeats": 3,
            **axis_fields(sweep)}
    (run / "metadata" / "run.json").write_text(json.dumps(meta))
    return build_report(run)


def _open(browser: Browser, report: Path, width: int) -> Page:
    context = browser.new_context(viewport={"width": width, "height": SCREEN_HEIGHT})
    page, log = open_report(context, report)
    assert not log.problems(), log.problems()
    return page


# Text boxes of each chart in the SVG's own units: title, legend entries, category labels.
_CHART_TEXTS = """els => els.map(svg => {
  const vb = svg.viewBox.baseVal;
  const box = t => { const b = t.getBBox(); return [t.getAttribute('class'), t.textContent,
                                                    b.x, b.y, b.width, b.height]; };
  return {title: svg.querySelector('title').textContent, width: vb.width,
          texts: [...svg.querySelectorAll('text.title, text.legend, text.category')].map(box)};
})"""

# Every number in a table cell (C=16, 8,809.50, +23.12 %, 13.47 s, 6,244 MiB) that the
# browser laid out on more than one line.
_WRAPPED_NUMBERS = r"""() => {
  const out = []; const number = /(C=)?[+\-−]?\d[\d,]*(\.\d+)?( ?(%|s|MiB))?/g;
  for (const cell of document.querySelectorAll('td, th')) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.textContent.matchAll(number)) {
        const r = document.createRange();
        r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(b => b.width > 0)
                                                     .map(b => Math.round(b.top)));
        if (tops.size > 1) out.push(`${m[0]} in "${cell.textContent.slice(0, 60)}"`);
      }
    }
  }
  return out; }"""


def _overlap(a: list[Any], b: list[Any]) -> bool:
    ax, ay, aw, ah = a[2:]
    bx, by, bw, bh = b[2:]
    return min(ax + aw, bx + bw) - max(ax, bx) > 0.5 and min(ay + ah, by + bh) - max(ay, by) > 0.5


@pytest.mark.parametrize("width", WIDTHS)
def test_axis_report_reads_at_every_width(browser: Browser, axis_report: Path, width: int
                                          ) -> None:
    page = _open(browser, axis_report, width)
    assert not overflow_problems(page)
    charts = page.eval_on_selector_all(".ppsweep svg.ppsweep-chart", _CHART_TEXTS)
    assert len(charts) >= 7, [c["title"] for c in charts]
    problems = []
    for chart in charts:
        texts = chart["texts"]
        for i, a in enumerate(texts):
            if a[2] < -0.5 or a[2] + a[4] > chart["width"] + 0.5:  # clipped by the viewBox
                problems.append(f"{chart['title']}: {a[0]} {a[1]!r} clipped")
            problems += [f"{chart['title']}: {a[0]} {a[1]!r} overprints {b[0]} {b[1]!r}"
                         for b in texts[i + 1:] if _overlap(a, b)]
    assert not problems, "\n".join(problems)
    wrapped = page.evaluate(_WRAPPED_NUMBERS)
    assert not wrapped, "\n".join(wrapped)


def test_charts_label_every_variant(browser: Browser, axis_report: Path) -> None:
    page = _open(browser, axis_report, 1280)
    charts = {c["title"]: c for c in page.eval_on_selector_all(".ppsweep svg.ppsweep-chart",
                                                                 _CHART_TEXTS)}
    categories = [t[1] for t in charts["Input TPS per layout"]["texts"] if t[0] == "category"]
    assert len(categories) == 12 and len(set(categories)) == 12, categories
    assert "8 / 4 / 4 a2a_deepep-prefill" in categories, categories
    assert "4 / 8 / 8 a2a_deepep-decode" in categories, categories  # EP rewritten to 8
    legends = [t[1] for t in charts["Input TPS at C=8 by moe_a2a_backend (prefill)"]["texts"]
               if t[0] == "legend"]
    assert legends == ["moe_a2a_backend=none", "moe_a2a_backend=deepep",
                       "moe_a2a_backend=flashinfer"]


def test_each_workload_table_shows_its_own_metrics(browser: Browser, axis_report: Path) -> None:
    page = _open(browser, axis_report, 1280)
    axes = page.locator(".ppsweep-axes")
    heads = axes.locator("h4").all_inner_texts()
    assert heads == [
        "Input TPS and worst-rank memory headroom by moe_a2a_backend — workload prefill",
        "Output TPS and worst-rank memory headroom by moe_a2a_backend — workload decode"]
    prefill, decode = (axes.locator("table").nth(i).inner_text() for i in (0, 1))
    assert "TTFT p50" in prefill and "TPOT" not in prefill and "n/a" not in prefill, prefill
    assert "TPOT p50" in decode and "n/a" not in decode, decode


def test_the_headroom_chart_is_readable(browser: Browser, axis_report: Path) -> None:
    """Headroom on its own axis: the largest bar fills most of the plot and the smallest is
    still a bar, not a sliver under an 85 GiB capacity line."""
    page = _open(browser, axis_report, 1280)
    chart = page.locator(".ppsweep svg.ppsweep-chart",
                         has=page.locator("title", has_text="headroom per layout"))
    assert chart.count() == 1
    heights = chart.evaluate("""svg => { const grid = [...svg.querySelectorAll('line')]
        .filter(l => l.getAttribute('stroke') === '#ddd').map(l => +l.getAttribute('y1'));
      const plot = Math.max(...grid) - Math.min(...grid);
      return [...svg.querySelectorAll('rect')].filter(r => r.querySelector('title'))
        .map(r => r.getBBox().height / plot); }""")
    assert len(heights) == 12, heights
    assert max(heights) >= 0.5 and min(heights) >= 0.2, heights
