"""Terminal summary: seed-like table, every line within the width."""

from __future__ import annotations

from pathlib import Path

from support.runs import Point, config_row, rounds, seed_run, write_run

from pytest_ppsweep.report.terminal import terminal_summary
from pytest_ppsweep.results.pipeline import analyse


def _lines(run: Path, width: int = 100) -> list[str]:
    _, summary, verdicts, rec = analyse(run)
    return terminal_summary(summary, verdicts, rec, width=width)


def test_seed_table(tmp_path: Path) -> None:
    lines = _lines(seed_run(tmp_path / "seed"))
    header = lines[1]
    for name in ("PP/TP/EP", "C", "Input TPS", "TTFT p50", "TTFT p95", "ΔTPS", "ΔTTFT", "verdict"):
        assert name in header
    pp8 = next(line for line in lines if line.startswith("8 / 4 / 4") and " 8 " in line)
    assert "8,809.50" in pp8 and "13.47 s" in pp8 and "+170.40 %" in pp8 and "VALID" in pp8
    assert any(line.startswith("1 / 32 / 4") and "base" in line for line in lines)
    assert "[layout] DECIDED: pp8-tp4-ep4, fallback pp4-tp8-ep4" in "\n".join(lines)
    assert all(len(line) <= 100 for line in lines)


def test_long_ids_and_failures_fit(tmp_path: Path) -> None:
    long_id = "pp8-tp4-ep4-" + "x" * 150
    rows = rounds(Point(long_id, 8, 4, 4, 8, 8800.0, 13.5, 16.4))
    rows += rounds(Point("dup", 8, 4, 4, 8, 8000.0, 15.0, 16.0), jitter=0.05)
    configs = [config_row(long_id, 8, 4, 4, 0, 79_000, log_clean=False,
                          log_findings="Traceback " * 40),
               config_row("dup", 8, 4, 4, 1, 79_000)]
    run = write_run(tmp_path / "long", rows, configs)
    for width in (100, 80):
        lines = _lines(run, width)
        assert all(len(line) <= width for line in lines), max(lines, key=len)
    text = "\n".join(_lines(run))
    # Same layout twice: the table names the config ids instead; the long one is never cut:
    # wider than the terminal, each value goes on a "title: value" line of its own, wrapped
    assert any(line.startswith("config: pp8-tp4-ep4-xxx") for line in _lines(run))
    assert "dup" in text
    assert "INVALID" in text
    lines = _lines(run, 80)
    first = next(i for i, line in enumerate(lines) if line.startswith("config: "))
    assert "config: " + long_id in "".join(line.strip() for line in lines[first:first + 3])


def _microbatch(tmp_path: Path) -> Path:
    import shutil

    from support.paths import REPO

    run = tmp_path / "mb"
    shutil.copytree(REPO / "tests" / "data" / "answers" / "microbatch", run)
    return run


def _block(lines: list[str], title: str) -> list[str]:
    start = lines.index(title)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("(", "PP/TP/EP")))
    while lines[end + 1].startswith("    "):  # the legend's own lines
        end += 1
    return lines[start:end + 1]


def test_decode_rows_show_decode_metrics_and_every_delta_names_its_point(tmp_path: Path) -> None:
    """microbatch.toml's run: a prefill and a decode workload, two axis values. The decode
    table shows output TPS, TPOT and ITL with their deltas (pp8's capped decode: TPOT +125.54 %
    worse, where its TTFT looked better); each row's Δ is under the point it is measured
    against (its own workload's and axis value's pp4 layout), never the run's named baseline."""
    lines = _lines(_microbatch(tmp_path), 100)
    text = "\n".join(lines)
    assert "Δ vs baseline pp4-tp8-ep4-prefill" not in text  # no header names another baseline
    decode = _block(lines, "PP/TP/EP sweep, workload decode (ids without -decode): medians over "
                           "repeats")
    assert decode[1].split() == ["config", "C", "Out", "TPS", "TPOT", "p50", "ITL", "p50", "ΔOut",
                                 "TPS", "ΔTPOT", "verdict"]
    assert "Input TPS" not in "\n".join(decode) and "TTFT" not in "\n".join(decode)
    capped = decode.index("Δ vs pp4-tp8-ep4-mbs1:")
    row = next(line for line in decode[capped:] if line.startswith("pp8-tp4-ep4-mbs1   1"))
    assert row.split()[2:10] == ["15.65", "59.3", "ms", "1.0", "ms", "-51.82", "%", "+125.54"]
    assert any(line.startswith("pp4-tp8-ep4-mbs1   1") and " base " in line
               for line in decode[capped:])
    legend = " ".join(line.strip() for line in decode[-3:])
    assert legend.endswith(
        "ΔOut TPS, ΔTPOT: % change of Out TPS, TPOT p50 against the point its group's heading "
        "names (\"Δ vs …\"); that point's own row reads \"base\"; C: concurrency)"), decode[-3:]
    prefill = _block(lines, "PP/TP/EP sweep, workload prefill (ids without -prefill): medians "
                            "over repeats")
    capped = prefill.index("Δ vs pp4-tp8-ep4-mbs1:")
    assert prefill[capped + 2].startswith("pp8-tp4-ep4-mbs1   8") and \
        "+44.49 %" in prefill[capped + 2]  # against pp4's capped prefill, not the +22.5 % of …
    assert "Input TPS" in prefill[1] and "Out TPS" not in "\n".join(prefill)
    # the Answers' axis tables: with their legend, every line within the width, never cut
    assert "    (Δ C=n: % change of output TPS at concurrency n vs the base row " \
           "(pp4-tp8-ep4-decode); headroom:" in text
    for width in (80, 150):
        lines = _lines(_microbatch(tmp_path / str(width)), width)
        # a rerun command stays whole on its own line, to be copied; every other line fits
        assert all(len(line) <= width for line in lines if not line.startswith("      Rerun: "))
        assert width == 150 or any(line.startswith("      Rerun: pytest ") for line in lines)


def test_the_html_medians_name_each_rows_point(tmp_path: Path) -> None:
    """The report's medians table: no title naming one baseline for rows that use others; a
    'Δ vs' column names each row's point."""
    from pytest_ppsweep.report.html import rebuild_report

    page = Path(rebuild_report(_microbatch(tmp_path))[0]).read_text()
    assert "deltas vs baseline pp4-tp8-ep4-prefill" not in page
    assert "Medians over repeats, each row's deltas vs the point in its Δ vs column" in page
    assert '<th class="l">Δ vs</th>' in page or "<th>Δ vs</th>" in page
    assert page.count("<td>pp4-tp8-ep4-mbs1-decode</td>") + page.count(
        '<td class="l">pp4-tp8-ep4-mbs1-decode</td>') >= 6  # its own row ×3 Cs, pp8's ×3


def test_points_without_a_delta_come_last_under_a_heading_that_says_why() -> None:
    """The a2a sweep's DeepEP point lost its partner (PP4 DeepEP ran out of memory, as
    expected): its rows once stood between two groups under "no point to compare with (no
    Δ)"; they come after every group, under a heading that says why, and the footnote says what
    each Δ is measured against (once "vs the Δ point")."""
    from support.paths import REPO

    from pytest_ppsweep.report.cli import show_lines
    from pytest_ppsweep.report.terminal import NO_DELTA_HEADING

    lines = show_lines(REPO / "tests" / "data" / "answers" / "a2a", 100)
    heads = [i for i, line in enumerate(lines) if line.startswith(("Δ vs ", "no Δ"))]
    assert lines[heads[-1]] == NO_DELTA_HEADING == \
        "no Δ: the point these compare with was not measured:"
    assert all(lines[i].startswith("Δ vs ") for i in heads[:-1]) and len(heads) == 3
    assert lines[heads[-1] + 1].startswith("pp8-tp4-ep4-a2a_deepep ")
    text = " ".join(lines)
    assert "vs the Δ point" not in text and "against the point its group's heading" in text


def test_the_summary_shows_each_layouts_worst_rank_headroom_beside_its_speed() -> None:
    """The seeds' §8 table gives the worst rank's memory headroom beside the speed (PP4 the
    fastest but one, with the least room: 3,234 MiB); the terminal summary once had none."""
    from support.paths import REPO

    from pytest_ppsweep.report.cli import show_lines

    for width in (80, 100):
        lines = show_lines(REPO / "tests" / "data" / "answers" / "ppsweep", width)
        at = next(i for i, line in enumerate(lines) if line.startswith(
            "worst-rank GPU memory headroom (free after the benchmark):"))
        text = " ".join(line.strip() for line in lines[at:at + 3])
        assert ("1 / 32 / 4: 4,230 MiB; 2 / 16 / 4: 5,506 MiB; 4 / 8 / 4: 3,234 MiB; "
                "8 / 4 / 4: 6,048 MiB; 16 / 2 / 2: 5,744 MiB") in text, lines[at:at + 3]
        assert all(len(line) <= width for line in lines[at:at + 3])
        assert lines[at - 1].endswith("C: concurrency)")  # right under the speed table


def test_the_summary_shows_the_kv_capacity_each_engine_reports(tmp_path: Path) -> None:
    """The KV cache's capacity belongs to the layout (its cache per GPU grows with TP): each
    layout's reported tokens and the requests of the workload it holds at once, under the
    headroom; no line for a run folder that has none (written before the columns existed)."""
    import shutil

    import pandas as pd
    from support.paths import REPO

    from pytest_ppsweep.report.cli import show_lines
    from pytest_ppsweep.report.terminal import KV_TITLE

    stored = REPO / "tests" / "data" / "answers" / "ppsweep"
    assert not any(line.startswith(KV_TITLE) for line in show_lines(stored, 100))
    run = tmp_path / "ppsweep"
    shutil.copytree(stored, run)
    frame = pd.read_csv(run / "configs.csv")
    tokens = {"pp1-tp32-ep4": 1_310_720, "pp2-tp16-ep4": 1_048_576, "pp4-tp8-ep4": 786_432,
              "pp8-tp4-ep4": 655_360, "pp16-tp2-ep2": 524_288}
    frame["kv_tokens"] = frame["config_id"].map(tokens)
    frame["kv_requests"] = frame["kv_tokens"] // 16385
    frame.to_csv(run / "configs.csv", index=False)
    for width in (80, 100):
        lines = show_lines(run, width)
        at = next(i for i, line in enumerate(lines) if line.startswith(KV_TITLE[:40]))
        text = " ".join(line.strip() for line in lines[at:at + 4])
        assert ("1 / 32 / 4: 1,310,720 (79); 2 / 16 / 4: 1,048,576 (63); 4 / 8 / 4: 786,432 "
                "(47); 8 / 4 / 4: 655,360 (39); 16 / 2 / 2: 524,288 (31)") in text, text
        assert all(len(line) <= width for line in lines[at:at + 4])
        assert lines[at - 1].endswith("MiB")  # right under the headroom line
