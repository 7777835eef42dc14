"""The command line ``python -m pytest_ppsweep``: rebuild a run's report, or compare two runs,
from the run folders alone.

    python -m pytest_ppsweep report reports/<run_id>
    python -m pytest_ppsweep compare reports/<run_a> reports/<run_b>

Exit status: 0 on success, 2 when a folder, file or column is missing (the message names it).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pytest_ppsweep.report.html import rebuild_report
from pytest_ppsweep.report.terminal import terminal_summary
from pytest_ppsweep.results.aggregate import (
    RunFolderError,
    compare_runs,
    load_run,
    summarize_run,
    write_compare,
)

EXIT_MISSING = 2
_WIDTH = 100


def _cmd_report(args: argparse.Namespace) -> int:
    path, summary, verdicts, rec = rebuild_report(args.run_dir)
    print(f"report: {path}")
    print(f"summary: {path.parent / 'summary.csv'}")
    print("\n".join(terminal_summary(summary, verdicts, rec, width=_WIDTH)))
    return 0


def _cell(value: object, fmt: str) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    return format(value, fmt)


def compare_lines(frame: pd.DataFrame, name_a: str, name_b: str, width: int = _WIDTH) -> list[str]:
    """The compare table as terminal lines of at most ``width`` characters."""
    lines = [f"medians: A = {name_a}, B = {name_b}; Δ = B vs A"[:width],
             f"{'config':<18}{'C':>4}{'TPS A':>11}{'TPS B':>11}{'ΔTPS':>10}"
             f"{'p50 A':>9}{'p50 B':>9}{'Δp50':>10}{'Δp95':>10}"]
    for r in frame.to_dict("records"):
        cid = str(r["config_id"])
        cid = cid if len(cid) <= 17 else cid[:16] + "…"
        lines.append((f"{cid:<18}{r['concurrency']:>4}{_cell(r['input_tps_a'], ',.2f'):>11}"
                      f"{_cell(r['input_tps_b'], ',.2f'):>11}"
                      f"{_cell(r['tps_delta_pct'], '+.2f'):>9}%"
                      f"{_cell(r['ttft_p50_s_a'], '.2f'):>9}{_cell(r['ttft_p50_s_b'], '.2f'):>9}"
                      f"{_cell(r['ttft_p50_delta_pct'], '+.2f'):>9}%"
                      f"{_cell(r['ttft_p95_delta_pct'], '+.2f'):>9}%")[:width])
    return lines


def _cmd_compare(args: argparse.Namespace) -> int:
    run_a, run_b = Path(args.run_a), Path(args.run_b)
    summary_a = summarize_run(load_run(run_a))
    summary_b = summarize_run(load_run(run_b))
    frame = compare_runs(summary_a, summary_b)
    name_a = run_a.resolve().name
    out = write_compare(run_b / f"compare-{name_a}.csv", frame)
    print("\n".join(compare_lines(frame, name_a, run_b.resolve().name)))
    print(f"written: {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the sub-command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m pytest_ppsweep",
                                     description="Rebuild or compare pytest-ppsweep run reports.")
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="rebuild summary.csv and report-rebuilt.html")
    report.add_argument("run_dir", type=Path, help="run folder, e.g. reports/<run_id>")
    report.set_defaults(func=_cmd_report)
    compare = sub.add_parser("compare", help="side-by-side medians of two runs")
    compare.add_argument("run_a", type=Path, help="reference run folder")
    compare.add_argument("run_b", type=Path, help="run folder compared with the reference; "
                         "the table is written to <run_b>/compare-<run_a name>.csv")
    compare.set_defaults(func=_cmd_compare)
    args = parser.parse_args(argv)
    try:
        status: int = args.func(args)
    except RunFolderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MISSING
    return status

