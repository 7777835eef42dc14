"""HTML summary: hostile data shows as text, the page is self-contained, the pieces are there."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from support.paths import REPO
from support.runs import Point, config_row, rounds, seed_run, write_run

from pytest_ppsweep.report.html import _medians, build_report, html_summary
from pytest_ppsweep.results.pipeline import analyse

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
HOSTILE_ID = f'pp8"{SCRIPT}'


def _html(run: Path) -> str:
    data, summary, verdicts, rec = analyse(run)
    return "\n".join(html_summary(data, summary, verdicts, rec))


@pytest.fixture
def hostile_run(tmp_path: Path) -> Path:
    rows = rounds(Point(HOSTILE_ID, 8, 4, 4, 8, 8800.0, 13.5, 16.4))
    rows += rounds(Point("pp4/../x", 4, 8, 4, 8, 7100.0, 17.3, 18.6))
    rows[0]["completed"] = 39
    configs = [config_row(HOSTILE_ID, 8, 4, 4, 0, 79_000, log_clean=False, log_findings=IMG),
               config_row("pp4/../x", 4, 8, 4, 1, 82_000, boot_error=SCRIPT,
                          mem_worst_node=IMG)]
    run = write_run(tmp_path / "hostile", rows, configs, image=SCRIPT, cluster=IMG,
                    matrix=f"{SCRIPT}.toml", engine_version=IMG, run_id=SCRIPT)
    # Evidence folders exist, so the report links them (a missing one is plain text).
    (run / "service" / HOSTILE_ID).mkdir(parents=True)
    for sub in ("pp4", "x"):
        (run / "raw" / sub).mkdir(parents=True)
    return run


def test_hostile_strings_are_escaped(hostile_run: Path) -> None:
    html = _html(hostile_run)
    assert SCRIPT not in html and IMG not in html
    assert "<script" not in html.lower()
    assert "onerror=alert(1)>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    # The config id is escaped in text and percent-encoded inside links.
    assert 'href="service/pp8%22%3Cscript%3Ealert%281%29%3C%2Fscript%3E/"' in html
    assert 'href="raw/pp4%2F..%2Fx/"' in html


def test_rebuilt_page_is_self_contained(hostile_run: Path) -> None:
    page = build_report(hostile_run).read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<link" not in page and "@import" not in page
    assert page.count("<svg") == 5  # TPS, TTFT, TTFT spread, memory, headroom


def test_sections_and_links(tmp_path: Path) -> None:
    html = _html(seed_run(tmp_path / "seed"))
    for heading in ("Medians over repeats", "Step-to-step deltas", "GPU memory", "Verdicts (10/10",
                    "Reasons and evidence", "Charts", "Evidence"):
        assert heading in html
    for target in ("results.csv", "configs.csv", "service/", "raw/", "gpu/", "metadata/"):
        assert f'href="{target}"' in html
    assert 'summary.csv (not written)' in html  # not yet written before the rebuild
    assert "+170.40 %" in html and "-65.63 %" in html and "6,244 MiB" in html
    assert "pp4-tp8-ep4 -&gt; pp8-tp4-ep4" in html and "+23.12 %" in html
    assert '<div class="ppsweep-decision" data-kind="layout" data-status="decided">' in html
    assert "<h4>layout: decided</h4>" in html  # the reasons and evidence section
    for field in (">seed<", "local/sglang:test", "0.5.0", "sim-4x8", "test_matrix/x.toml"):
        assert field in html


def test_simulated_banner_first(tmp_path: Path) -> None:
    fragments = [f for f in _fragments(seed_run(tmp_path / "sim", time_scale=250.0)) if f]
    assert "SIMULATED RUN" in fragments[1] and "x250" in fragments[1]


def test_no_banner_for_real_runs(tmp_path: Path) -> None:
    rows = rounds(Point("a", 8, 4, 4, 8, 8800.0, 13.5, 16.4))
    for row in rows:
        row["simulated"] = False
    run = write_run(tmp_path / "real", rows, [config_row("a", 8, 4, 4, 0, 79_000)],
                    simulated=False)
    assert "SIMULATED" not in _html(run)


def _fragments(run: Path) -> list[str]:
    data, summary, verdicts, rec = analyse(run)
    return html_summary(data, summary, verdicts, rec)


def test_cluster_column_only_when_a_pool_measured_the_run(tmp_path: Path) -> None:
    assert ">Cluster</th>" not in _html(seed_run(tmp_path / "one"))
    run = seed_run(tmp_path / "pool")
    configs = (run / "configs.csv").read_text().splitlines()
    configs = [configs[0] + ",cluster"] + [
        f"{line},{'local' if i % 2 else 'local-<b>'}" for i, line in enumerate(configs[1:])
    ]
    (run / "configs.csv").write_text("\n".join(configs) + "\n")
    html = _html(run)
    assert '<th class="l">Cluster</th>' in html
    assert '<td class="l">local</td>' in html and '<td class="l">local-&lt;b&gt;</td>' in html


def test_decision_comes_first(tmp_path: Path) -> None:
    """The answer precedes every table: layout, vs baseline and runner-up, trust, fallback."""
    html = _html(seed_run(tmp_path / "seed"))
    decision = html.index('class="ppsweep-decision"')
    assert decision < html.index("<h3>Reasons and evidence") < html.index("<h3>Medians")
    assert html.index("<h3>Medians") < html.index("<h3>Charts") < html.index("<h3>Run<")
    block = html[decision:html.index("<h3>Reasons and evidence")]
    assert "Use <b>8 / 4 / 4</b>" in block and "<code>pp8-tp4-ep4</code>" in block
    assert "vs baseline pp1-tp32-ep4" in block and "vs runner-up pp4-tp8-ep4" in block
    assert '<span class="better">+170.40 %</span>' in block
    assert '<span class="better">-22.05 %</span>' in block  # lower TTFT is better
    assert "10/10 points of the run valid" in block and "(limit 2.0 %)" in block
    assert "6,244 MiB of 85,651 MiB (7.3 %) on node1 / GPU 3" in block
    assert "Fallback: <b>pp4-tp8-ep4</b>" in block


def test_decision_names_an_invalid_baseline_and_escapes(tmp_path: Path) -> None:
    rows = rounds(Point("pp1-tp32-ep4", 1, 32, 4, 8, 3000.0, 40.0, 42.0), jitter=0.05)
    rows += rounds(Point(HOSTILE_ID, 8, 4, 4, 8, 8800.0, 13.5, 16.4))
    configs = [config_row("pp1-tp32-ep4", 1, 32, 4, 0, 81_000),
               config_row(HOSTILE_ID, 8, 4, 4, 1, 79_000, mem_worst_node=IMG)]
    html = _html(write_run(tmp_path / "run", rows, configs))
    block = html[html.index('class="ppsweep-decision"'):html.index("<h3>Reasons and evidence")]
    assert SCRIPT not in block and IMG not in block
    assert "&lt;script&gt;" in block and "&lt;img src=x onerror=alert(1)&gt; / GPU 3" in block
    assert "vs baseline pp1-tp32-ep4 (INVALID)" in block
    # Over the spread limit only: still ranked (second here), never silently dropped.
    assert "Fallback: <b>pp1-tp32-ep4</b>" in block and "vs runner-up" not in block


def test_decision_when_nothing_is_valid(tmp_path: Path) -> None:
    rows = rounds(Point("a", 8, 4, 4, 8, 8800.0, 13.5, 16.4), jitter=0.05)
    html = _html(write_run(tmp_path / "run", rows, [config_row("a", 8, 4, 4, 0, 79_000,
                                                               log_clean=False)]))
    assert ('<div class="ppsweep-decision none" data-kind="layout" data-status="no valid point">'
            '<p class="use">No layout recommended: no valid point</p>') in html
    assert "(0/1 points valid)" in html


@pytest.mark.parametrize(("status", "extra", "use", "colour"), [
    ("inconclusive", {}, "No layout decided: inconclusive", "open"),
    ("equivalent", {"equivalent": ["pp4-tp8-ep4", "pp8-tp4-ep4"]},
     "No single layout: pp4-tp8-ep4 = pp8-tp4-ep4 are equivalent", "open"),
    ("measured", {}, "Measured, not compared: pp8-tp4-ep4", "open"),
    ("no valid point", {}, "No layout recommended: no valid point", "none"),
    ("running", {"leader": "pp8-tp4-ep4", "text": "2 of 5 layouts measured so far: …"},
     "Running: nothing decided yet", "open"),
    ("interrupted", {"text": "interrupted after 1 of 5 layouts: …"},
     "Interrupted: nothing decided", "none"),
])
def test_an_undecided_headline_names_its_real_status(tmp_path: Path, status: str,
                                                     extra: dict[str, object], use: str,
                                                     colour: str) -> None:
    """The box never says "inconclusive" for another status (issue 39)."""
    data, summary, verdicts, answers = analyse(seed_run(tmp_path / "run"))
    layout = next(a for a in answers if a.kind == "layout")
    answer = replace(layout, status=status, answer="pp8-tp4-ep4" if status == "measured"
                     else None, fallback=None, extra=extra)
    html = "\n".join(html_summary(data, summary, verdicts, [answer]))
    assert (f'<div class="ppsweep-decision {colour}" data-kind="layout" data-status="{status}">'
            f'<p class="use">{use}</p>') in html


def test_decode_rows_show_decode_metrics_in_a_table_of_their_own() -> None:
    """Issue 39 point 6: microbatch's decode rows read in output TPS, TPOT and ITL (its capped
    decode point is 125.54 % worse on TPOT p50), never in Input TPS and TTFT."""
    stored = Path(__file__).resolve().parents[1] / "data" / "answers" / "microbatch"
    _data, summary, verdicts, _answers = analyse(stored)
    page = _medians(summary, {(v.config_id, v.concurrency): v for v in verdicts})
    prefill, decode = page.split("<h3>Decode medians over repeats")
    assert "-decode" not in prefill and "-prefill" not in decode
    assert "Input TPS" not in decode and "TTFT" not in decode
    assert all(h in decode for h in ("Output TPS", "TPOT p50", "ITL p50", "TPOT p50 vs base"))
    row = decode[decode.index(">pp8-tp4-ep4-mbs1-decode<"):][:600]
    assert "+125.54 %" in row and " ms<" in row


def test_the_decision_box_names_the_rule_and_alpha_and_prints_the_answers_delta() -> None:
    """The box says which rule decided (with α), and its Δ vs the runner-up is the Answers' own
    (the ratio of geometric means), not a second computation from the medians."""
    from pytest_ppsweep.report.format import delta

    data, summary, verdicts, answers = analyse(REPO / "tests" / "data" / "answers" / "ppsweep")
    (layout,) = answers
    page = "\n".join(html_summary(data, summary, verdicts, answers))
    box = page[page.index('<div class="ppsweep-decision'):]
    box = box[:box.index("</div>")]
    assert "by the decision rule" in box and "α = 0.05 family-wise (Holm)" in box
    assert "noise rule" not in box
    ev = next(e for e in layout.evidence if e.point == layout.answer
              and e.versus == layout.fallback and e.metric == "input_tps")
    assert delta(ev.delta_pct) in box, (delta(ev.delta_pct), box)


def test_the_memory_table_shows_the_kv_cache_where_a_layout_reported_it(tmp_path: Path) -> None:
    """configs.csv's kv_tokens and kv_requests get two columns of the memory table; a run
    folder without them (written before the columns) has none, and a layout that reported
    nothing reads n/a."""
    assert "KV cache (tokens)" not in _html(seed_run(tmp_path / "old"))
    run = seed_run(tmp_path / "kv")
    configs = (run / "configs.csv").read_text().splitlines()
    configs = [configs[0] + ",kv_tokens,kv_requests"] + [
        f"{line},{'655360,39' if i == 0 else ','}" for i, line in enumerate(configs[1:])]
    (run / "configs.csv").write_text("\n".join(configs) + "\n")
    html = _html(run)
    table = html[html.index("GPU memory (worst rank)"):]
    table = table[:table.index("</table>")]
    assert "<th>KV cache (tokens)</th>" in table and "<th>Requests the KV holds</th>" in table
    assert "<td>655,360</td><td>39</td>" in table
    assert table.count("<td>n/a</td><td>n/a</td>") == len(configs) - 2
