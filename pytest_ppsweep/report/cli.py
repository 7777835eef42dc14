"""The command line ``python -m pytest_ppsweep``: find, read, rebuild and compare stored runs from
the run folders alone (no cluster, no pytest).

    python -m pytest_ppsweep runs [--reports DIR]
    python -m pytest_ppsweep show RUN [--reports DIR]
    python -m pytest_ppsweep report RUN [--reports DIR]
    python -m pytest_ppsweep compare RUN_A RUN_B [--reports DIR]
    python -m pytest_ppsweep fit RUN... [--out PATH] [--reports DIR]
    python -m pytest_ppsweep plan --profile RUN_OR_FITTED [--workload c=1,input=32768] [--all]

RUN is everywhere a run id in the reports folder, a unique prefix of one, or a path.

Exit status: 0 on success, 2 when a folder, file or column is missing (the message names it)
and on a usage error. A pipe closed early (``runs | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from pytest_ppsweep.folder.runfolder import (
    ANSWERS_JSON,
    PLAN_CSV,
    PLAN_CSV_NAME,
    PLANNER_DIR,
    PLANNER_PROFILE_JSON,
    REPORT_HTML,
    RESULTS_CSV,
    SUMMARY_CSV,
    FolderFiles,
    RunFolder,
)
from pytest_ppsweep.gate.bisect import BisectError, GateRunner, read_images, search
from pytest_ppsweep.gate.comparison import (
    DEFAULT_THRESHOLDS,
    GATE_CSV,
    METRICS,
    ThresholdError,
    notable_lines,
    parse_thresholds,
    read_comparison_csv,
    wrong_image_line,
)
from pytest_ppsweep.gate.history import (
    History,
    HistoryError,
    RunRecord,
    read_run,
    run_folders,
    trend_lines,
)
from pytest_ppsweep.matrix.schema import did_you_mean
from pytest_ppsweep.planner.data import PlannerError, load_measured
from pytest_ppsweep.planner.fitting import fit, load_fitted
from pytest_ppsweep.planner.plan import (
    parameter_lines,
    parse_workload,
    plan_lines,
    plan_rows,
    write_plan_csv,
)
from pytest_ppsweep.planner.trust import fit_trust
from pytest_ppsweep.report.format import wrap_lines
from pytest_ppsweep.report.html import rebuild_report
from pytest_ppsweep.report.summary import gate_table, status_lines, terminal_lines
from pytest_ppsweep.report.terminal import terminal_summary
from pytest_ppsweep.results.aggregate import (
    RunFolderError,
    compare_runs,
    load_run,
    summarize_run,
    write_compare,
)
from pytest_ppsweep.results.answers import one_line
from pytest_ppsweep.results.livestatus import folder_status
from pytest_ppsweep.results.pipeline import analyse
from pytest_ppsweep.results.runstatus import RUNNING

if TYPE_CHECKING:
    from pytest_ppsweep.planner.trust import FitTrust

EXIT_MISSING = 2
DEFAULT_REPORTS = Path("reports")  # like the plugin's --ppsweep-reports default
_WIDTH = 100


def _cmd_report(args: argparse.Namespace) -> int:
    run_dir = resolve_run(str(args.run_dir), args.reports)
    path, summary, verdicts, rec = rebuild_report(run_dir)
    print(f"report: {path}")
    status = folder_status(run_dir)
    if status is not None and status.status == RUNNING:  # report/html.rebuild_report: not saved
        print(f"summary: not written: the run is still running (it writes {SUMMARY_CSV} and "
              f"{ANSWERS_JSON} at its close); this report is a snapshot")
    else:
        print(f"summary: {path.parent / SUMMARY_CSV}")
    print("\n".join(terminal_summary(summary, verdicts, rec, width=terminal_width())))
    return 0


def _cell(value: object, fmt: str, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(value, fmt) + unit


def gate_verdicts(run_a: Path, run_b: Path) -> dict[tuple[str, int, str], tuple[float, str]]:
    """(config, C, metric) → (noise %, verdict) of B against A, by the gate's rule
    (:mod:`pytest_ppsweep.stats.gatenoise`, :func:`pytest_ppsweep.gate.comparison.compare`)."""
    from pytest_ppsweep.gate.comparison import compare

    out: dict[tuple[str, int, str], tuple[float, str]] = {}
    for c in compare(run_b, run_a):
        if c.metric:
            out[(c.config_id, c.concurrency, c.metric)] = (
                math.nan if c.noise_pct is None else c.noise_pct, c.verdict)
    return out


_SHORT_VERDICT = {"within noise": "noise", "significant": "sig", "regression": "REGR",
                  "inconclusive": "INCONCL", "improvement": "better"}


def compare_lines(frame: pd.DataFrame, name_a: str, name_b: str, width: int = _WIDTH) -> list[str]:
    """The compare table as terminal lines of at most ``width`` characters: medians, the
    change of B vs A, the noise (±, by the gate's rule) and the gate's verdict of the change."""
    lines = [f"medians: A = {name_a}, B = {name_b}; Δ = B vs A"[:width],
             "± = noise by the gate's rule (5 × the median distance of a repeat from its run's "
             "median)"[:width],
             "verdict of TPS/p50: noise = within noise, sig = significant (beyond noise, under "
             "the threshold),"[:width],
             f"  REGR = regression, INCONCL = worse than the threshold within noise, better = "
             f"improvement (thresholds "
             f"{', '.join(DEFAULT_THRESHOLDS)})"[:width],
             f"{'config':<16}{'C':>4}{'TPS A':>10}{'TPS B':>10}{'ΔTPS':>8}{'±':>6}"
             f"{'p50 A':>8}{'p50 B':>8}{'Δp50':>8}{'±':>6}  {'verdict'}"]
    for r in frame.to_dict("records"):
        cid = str(r["config_id"])
        cid = cid if len(cid) <= 15 else cid[:14] + "…"
        verdicts = [_SHORT_VERDICT.get(str(r.get(f"{m}_verdict") or ""), str(
            r.get(f"{m}_verdict") or "n/a")) for m in ("tps", "ttft_p50")]
        lines.append((f"{cid:<16}{r['concurrency']:>4}{_cell(r['input_tps_a'], ',.1f'):>10}"
                      f"{_cell(r['input_tps_b'], ',.1f'):>10}"
                      f"{_cell(r['tps_delta_pct'], '+.2f', '%'):>8}"
                      f"{_cell(r.get('tps_noise_pct'), '.1f', '%'):>6}"
                      f"{_cell(r['ttft_p50_s_a'], '.2f'):>8}{_cell(r['ttft_p50_s_b'], '.2f'):>8}"
                      f"{_cell(r['ttft_p50_delta_pct'], '+.2f', '%'):>8}"
                      f"{_cell(r.get('ttft_p50_noise_pct'), '.1f', '%'):>6}"
                      f"  {'/'.join(verdicts)}")[:width])
    return lines


def _cmd_compare(args: argparse.Namespace) -> int:
    run_a = resolve_run(str(args.run_a), args.reports)
    run_b = resolve_run(str(args.run_b), args.reports)
    summary_a = summarize_run(load_run(run_a))
    summary_b = summarize_run(load_run(run_b))
    frame = compare_runs(summary_a, summary_b)
    gate = gate_verdicts(run_a, run_b)
    for name, metric in (("tps", "input_tps"), ("ttft_p50", "ttft_p50")):
        cells = [gate.get((str(r["config_id"]), int(r["concurrency"]), metric), (math.nan, ""))
                 for r in frame.to_dict("records")]
        frame[f"{name}_noise_pct"] = [c[0] for c in cells]
        frame[f"{name}_verdict"] = [c[1] for c in cells]
    name_a = run_a.resolve().name
    out = write_compare(run_b / f"compare-{name_a}.csv", frame)
    print("\n".join(compare_lines(frame, name_a, run_b.resolve().name)))
    print(f"written: {out}")
    return 0


# -- runs: one line per stored run -------------------------------------------------------------


@dataclass(frozen=True)
class RunLine:
    """What ``runs`` shows of one run folder."""
    run_id: str
    date: datetime | None
    sweep: str
    image: str
    cluster: str
    layouts: int | None
    valid: int | None
    invalid: int | None
    gate: str
    answers: str = ""  # the run's answers in one line (results/answers.one_line)
    status: str = ""  # the run's status in one line (results/runstatus.RunStatus.brief)


def read_run_line(run_dir: Path) -> RunLine:
    """The ``runs`` line of one run folder, read from the folder (RunFolderError when it has no
    readable manifest)."""
    return _line(run_dir, read_run(run_dir)[0])


def _line(run_dir: Path, r: RunRecord) -> RunLine:
    """A history record as a ``runs`` line; its status is read from the folder now (a running
    run's changes by the second: results/livestatus.py), the rest comes from the record."""
    status = folder_status(run_dir) if run_dir.is_dir() else None
    return RunLine(r.run_id, r.date, r.sweep, r.image, r.cluster, r.layouts, r.valid, r.invalid,
                   r.gate, r.answers, status.brief() if status is not None else "")


def find_runs(reports: Path) -> tuple[list[tuple[Path, RunLine]], list[str]]:
    """Every run folder directly in ``reports``, newest first, and why other folders were
    skipped. (Named baselines live in ``reports/baselines/``: not runs of this listing.)
    Read from the history (gate/history.py), repaired from the folders first; from the
    folders alone when the history cannot be read or written (a warning line says so)."""
    if not reports.is_dir():
        raise RunFolderError(f"missing reports folder: {reports}")
    history = History(reports)
    try:
        skipped = history.sync()
        records = history.records(sync=False)
    except HistoryError as exc:
        print(f"warning: {exc}; reading the run folders instead", file=sys.stderr)
    else:
        return [(reports / r.folder, _line(reports / r.folder, r)) for r in records], skipped
    found, skipped = [], []
    for folder in run_folders(reports):
        try:
            found.append((folder, read_run_line(folder)))
        except RunFolderError as exc:
            skipped.append(f"{folder.name}: {exc}")
    found.sort(key=lambda item: (item[1].date or datetime.min, item[0].name), reverse=True)
    return found, skipped


# (header, width, right-aligned): 100 columns in all with a 24-character id, one space between
# columns. "lay": layouts; "val/inv": valid/invalid verdicts (configuration x C). The run id is
# never cut (it is what show, report and compare take); sweep, image and cluster give way.
_COLUMNS = (("run id", 24, False), ("date", 16, False), ("sweep", 8, False),
            ("image", 13, False), ("cluster", 7, False), ("lay", 3, True),
            ("val/inv", 7, True), ("gate", 15, False))
_FLEXIBLE = ("sweep", "image", "cluster")
_MIN_FLEXIBLE = 5


def _fit(text: str, width: int, right: bool, tail: bool = False) -> str:
    if len(text) > width:
        text = "…" + text[1 - width:] if tail else text[:width - 1] + "…"
    return f"{text:>{width}}" if right else f"{text:<{width}}"


def _widths(rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Column widths for ``rows`` (header first) in ``width`` characters, 0 for a column left
    out: the id column as wide as the longest id; sweep, image and cluster share what is left,
    each at least :data:`_MIN_FLEXIBLE` and at most its longest cell; on a terminal too narrow
    even for that, cluster, image, sweep and lay are left out, in that order."""
    widths = [w for _, w, _ in _COLUMNS]
    widths[0] = max(len(r[0]) for r in rows)
    names = [h for h, _, _ in _COLUMNS]
    flex = [i for i, h in enumerate(names) if h in _FLEXIBLE]

    def fixed() -> int:
        shown = [i for i, w in enumerate(widths) if w]
        return sum(widths[i] for i in shown if i not in flex) + len(shown) - 1

    for name in ("cluster", "image", "sweep", "lay"):
        if fixed() + _MIN_FLEXIBLE * sum(1 for i in flex if widths[i]) <= width:
            break
        widths[names.index(name)] = 0
    flex = [i for i in flex if widths[i]]
    room = max(width - fixed(), _MIN_FLEXIBLE * len(flex))
    want = {i: max(len(r[i]) for r in rows) for i in flex}
    base = {i: min(_COLUMNS[i][1], want[i]) for i in flex}
    scale = min(1.0, room / max(sum(base.values()), 1))
    for i in flex:
        widths[i] = max(_MIN_FLEXIBLE, int(base[i] * scale))
    spare = room - sum(widths[i] for i in flex)
    for i in flex:  # a wide terminal: the cut cells get their whole text, image first
        grow = max(0, min(spare, want[i] - widths[i]))
        widths[i] += grow
        spare -= grow
    return widths


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    # An image is told apart by its tag: a long one keeps its end ("…mxfp4-phase5").
    return " ".join(_fit(cell, width, right, tail=header == "image")
                    for (header, _, right), width, cell in zip(_COLUMNS, widths, cells,
                                                               strict=True) if width
                    ).rstrip()


def terminal_width(default: int = _WIDTH) -> int:
    """The terminal's width (``COLUMNS``, else the terminal, else ``default``)."""
    return shutil.get_terminal_size((default, 24)).columns


def runs_lines(found: Sequence[tuple[Path, RunLine]], width: int | None = None) -> list[str]:
    """The ``runs`` table, one line per run, fitted to ``width`` (the terminal's): every run id
    whole, the other columns cut to fit."""
    width = terminal_width() if width is None else width
    rows = [[h for h, _, _ in _COLUMNS]]
    under: dict[int, list[str]] = {}
    for _, r in found:
        counts = "—" if r.valid is None else f"{r.valid}/{r.invalid}"
        rows.append([r.run_id, r.date.strftime("%Y-%m-%d %H:%M") if r.date else "?",
                     r.sweep or "—", r.image or "—", r.cluster or "—",
                     "?" if r.layouts is None else str(r.layouts), counts, r.gate])
        under[len(rows) - 1] = ([f"  status: {r.status}"] if r.status else []) + (
            [f"  answers: {r.answers}"] if r.answers else [])
    widths = _widths(rows, width)
    lines = []
    for i, cells in enumerate(rows):
        lines.append(_row(cells, widths))
        # its status and answers under it, wrapped to the width (nothing cut)
        lines += wrap_lines(under.get(i, ()), width)
    return lines


def _cmd_runs(args: argparse.Namespace) -> int:
    reports = Path(args.reports)
    found, skipped = find_runs(reports)
    if not found:
        print(f"no runs in {reports}")
    else:
        print("\n".join(runs_lines(found)))
    for why in skipped:
        print(f"skipped {why}")  # names a path: may be longer than the table
    return 0


# -- show: a stored run's terminal summary -----------------------------------------------------


def resolve_run(run: str, reports: Path) -> Path:
    """A run folder from a path, a run id in ``reports``, a unique prefix of one, or an image
    (its newest run in the history; gate/history.py) (RunFolderError naming what was looked
    for, or every run the prefix matches)."""
    path = Path(run)
    if path.is_dir():
        return path
    if "/" not in run and run:
        if (reports / run).is_dir():
            return reports / run
        matches = [p for p in run_folders(reports) if p.name.startswith(run)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise RunFolderError(
                f"ambiguous run id prefix: {run} matches {len(matches)} runs in {reports}: "
                f"{', '.join(p.name for p in matches[:10])}{' …' if len(matches) > 10 else ''}")
    image = _run_of_image(run, reports)
    if image is not None:
        return image
    looked = str(path) if "/" in run else f"{path} and {reports / run}"
    raise RunFolderError(f"missing run folder: {run} (looked for {looked})")


def _run_of_image(image: str, reports: Path) -> Path | None:
    """The newest run of ``image`` in the history (a complete one first), None without."""
    if not reports.is_dir():
        return None
    try:
        found = History(reports).runs_of_image(image)
    except HistoryError:
        return None
    return reports / found[0].folder if found else None


def _sep(title: str, width: int = _WIDTH) -> str:
    return f" {title} ".center(width, "=")


def gate_lines(run_dir: Path, width: int = _WIDTH) -> list[str]:
    """The gate table and WRONG/REGRESSION/SIGNIFICANT lines the plugin printed, rebuilt from
    gate.csv."""
    rows = read_comparison_csv(run_dir)
    return gate_table(rows, width) + notable_lines(rows)


def show_lines(run_dir: Path, width: int = _WIDTH) -> list[str]:
    """The terminal summary the plugin printed for the run in ``run_dir``, rebuilt from its
    files: the medians table with verdicts and the answers, then the gate (a gate that found
    wrong outputs or task scores says so first)."""
    try:
        analysis = analyse(run_dir)
    except RunFolderError as exc:
        status = folder_status(run_dir)
        if status is None:
            raise
        # a run in its first seconds (only run.json), or one stopped before its first round
        measured = (f"no summary: {exc}" if (run_dir / RESULTS_CSV).is_file()
                    else "nothing measured yet" if status.status == RUNNING
                    else "nothing measured")
        return [_sep(f"ppsweep summary: {RunFolder(run_dir).recorded_run_id()}", width),
                *status_lines(status, width), measured, f"run folder: {run_dir}"]
    data, _, _, answers = analysis
    state = status_lines(data.meta.status, width) if data.meta.status else []
    try:  # a gate that found wrong outputs comes first: nothing after it is usable
        wrong = wrong_image_line(read_comparison_csv(run_dir))
    except (KeyError, ValueError) as exc:
        raise RunFolderError(f"{run_dir / GATE_CSV}: unreadable ({exc})") from exc
    state = wrap_lines([wrong], width) + state if wrong else state
    # what the run's end printed: the medians, verdicts and answers, and the SLO searches,
    # accuracy, planner and communication blocks where the run has them
    lines = [_sep(f"ppsweep summary: {data.meta.run_id}", width), *state,
             *terminal_lines(analysis, data.files or FolderFiles.of(run_dir), width)]
    lines += wrap_lines([f"answers: {one_line([a.as_dict() for a in answers])}"], width)
    if (run_dir / GATE_CSV).is_file():
        try:
            gate = gate_lines(run_dir, width)
        except (KeyError, ValueError) as exc:
            raise RunFolderError(f"{run_dir / GATE_CSV}: unreadable ({exc})") from exc
        lines += [_sep(f"ppsweep gate ({GATE_CSV})", width), *gate]
    lines.append(f"run folder: {run_dir}")
    report = run_dir / REPORT_HTML
    lines.append(f"report: {report}" if report.is_file() else f"report: (no {REPORT_HTML})")
    return lines


def _cmd_show(args: argparse.Namespace) -> int:
    print("\n".join(show_lines(resolve_run(args.run, Path(args.reports)), terminal_width())))
    return 0


# -- history and trend: the run history (gate/history.py) ---------------------------------------


def _cmd_history(args: argparse.Namespace) -> int:
    reports = Path(args.reports)
    if not reports.is_dir():
        raise RunFolderError(f"missing reports folder: {reports}")
    history = History(reports)
    if args.rebuild:
        count, skipped = history.rebuild()
        print(f"history rebuilt from {count} run folder(s): {history.path}")
    else:
        skipped = history.sync()
    records = history.records(sync=False)
    sweeps = sorted({r.sweep for r in records})
    print(f"{history.path}: {len(records)} run(s), sweeps: {', '.join(sweeps) or '—'}")
    for why in skipped:
        print(f"skipped {why}")
    return 0


def _cmd_trend(args: argparse.Namespace) -> int:
    reports = Path(args.reports)
    if not reports.is_dir():
        raise RunFolderError(f"missing reports folder: {reports}")
    metric = args.metric.removesuffix("_s")
    if metric not in METRICS:
        print(f"error: --metric {args.metric!r}: expected one of {', '.join(METRICS)}"
              + did_you_mean(metric, list(METRICS)), file=sys.stderr)
        return EXIT_MISSING
    history = History(reports)
    rows = history.trend(args.sweep, metric, args.layout)
    if not rows:
        known = history.sweeps()
        if args.sweep not in known:  # a name from the command line: SWEEP, did you mean
            print(f"error: SWEEP {args.sweep!r}: no run of that sweep in the history of "
                  f"{reports}{did_you_mean(args.sweep, known)}; sweeps: "
                  f"{', '.join(known) or 'none'}", file=sys.stderr)
            return EXIT_MISSING
        print(f"error: no {metric} of sweep {args.sweep!r}"
              + (f" layout {args.layout!r}" if args.layout else "")
              + f" in the history of {reports} (sweeps: {', '.join(known) or 'none'})",
              file=sys.stderr)
        return EXIT_MISSING
    print("\n".join(trend_lines(rows, metric)))
    return 0


# -- the parser --------------------------------------------------------------------------------

_EPILOG = """\
verbs:
  runs      list the stored runs of a reports folder, newest first
  show      print a stored run's terminal summary (medians, verdicts, answers, gate)
  report    rebuild summary.csv and report-rebuilt.html of a run folder
  compare   side-by-side medians of two runs
  fit       fit the planner's cost model to measured runs (RUN/planner/profile.json)
  plan      predict every layout the cluster can run, with 90 % intervals
  history   the run history (reports/history.sqlite): repair it, or --rebuild it
  trend     each point's metric across the images and dates of a sweep's runs
  bisect    find the first image of an ordered list that regressed (runs the gate)

examples:
  python -m pytest_ppsweep runs
  python -m pytest_ppsweep show kimi3-pp-20261201-090656
  python -m pytest_ppsweep show kimi3-pp-20261201        (a unique prefix of a run id)
  python -m pytest_ppsweep report kimi3-pp-20261201-090656
  python -m pytest_ppsweep compare <last-good> <new-image>
  python -m pytest_ppsweep fit kimi3-pp-20261201-090656
  python -m pytest_ppsweep plan --profile kimi3-pp-20261201-090656
  python -m pytest_ppsweep history --rebuild
  python -m pytest_ppsweep trend kimi3-pp --layout pp8-tp4-ep4 --metric ttft_p50

RUN, for every verb: a run id in the reports folder (--reports DIR, default ./reports), a
unique prefix of one, a path to a run folder, or an image (its newest run in the history).

Run `python -m pytest_ppsweep VERB --help` for a verb's options.
Exit status: 0 on success; 2 on a usage error or when a folder, file or column is missing
(the message names it)."""

_HELP = {
    "runs": ("list the stored runs, newest first",
             "One line per run folder of the reports folder, newest first: run id, start date,\n"
             "sweep, image, cluster, layouts (lay), valid/invalid verdicts of configuration x C\n"
             "(val/inv) and the gate result from gate.csv (pass, N regressions: points that\n"
             "regressed or broke, or — for a run without --ppsweep-compare).",
             "examples:\n  python -m pytest_ppsweep runs\n"
             "  python -m pytest_ppsweep runs --reports /data/ppsweep/reports"),
    "show": ("print a stored run's terminal summary",
             "Print the summary the plugin printed at the end of the run, rebuilt from the run\n"
             "folder's files: medians with deltas vs the baseline and verdicts, every INVALID\n"
             "reason, the answers, and the gate when the run has a gate.csv.\n"
             "Nothing in the run folder is written.",
             "examples:\n  python -m pytest_ppsweep show kimi3-pp-20261201-090656\n"
             "  python -m pytest_ppsweep show reports/kimi3-pp-20261201-090656\n"
             "  python -m pytest_ppsweep show gold --reports reports/baselines"),
    "report": ("rebuild summary.csv and report-rebuilt.html",
               "Rebuild summary.csv and a self-contained report-rebuilt.html from the run\n"
               "folder's files alone, then print the terminal summary.",
               "examples:\n  python -m pytest_ppsweep report kimi3-pp-20261201-090656\n"
               "  python -m pytest_ppsweep report reports/kimi3-pp-20261201-090656"),
    "compare": ("side-by-side medians of two runs",
                "Medians of two runs per configuration x C with the deltas of B vs A in %, the\n"
                "noise of each (±) and whether the change is beyond it, both by the gate's rule\n"
                "(5 x the median distance of a repeat from its run's median; stats/gatenoise.py):\n"
                "noise, significant, REGRESSION or improvement against the default thresholds.\n"
                "The table is also written to <run_b>/compare-<run_a name>.csv.",
                "examples:\n  python -m pytest_ppsweep compare <run_a> <run_b>\n"
                "  python -m pytest_ppsweep compare reports/<run_a> reports/<run_b>"),
}


def _sub(sub: argparse._SubParsersAction[argparse.ArgumentParser],
         name: str) -> argparse.ArgumentParser:
    short, description, epilog = _HELP[name]
    return sub.add_parser(name, help=short, description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _reports_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reports", type=Path, default=DEFAULT_REPORTS, metavar="DIR",
                        help="the reports folder (default: ./reports, like --ppsweep-reports)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every verb, with its help and examples."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_ppsweep", epilog=_EPILOG,
        description="Find, read, rebuild and compare pytest-ppsweep runs from their run folders.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="VERB")
    runs = _sub(sub, "runs")
    _reports_option(runs)
    runs.set_defaults(func=_cmd_runs)
    show = _sub(sub, "show")
    show.add_argument("run", metavar="RUN", help="a run id in the reports folder, or a path")
    _reports_option(show)
    show.set_defaults(func=_cmd_show)
    report = _sub(sub, "report")
    report.add_argument("run_dir", metavar="RUN",
                        help="a run id in the reports folder, a unique prefix of one, or a path")
    _reports_option(report)
    report.set_defaults(func=_cmd_report)
    compare = _sub(sub, "compare")
    compare.add_argument("run_a", metavar="RUN_A", help="the reference run (id, prefix or path)")
    compare.add_argument("run_b", metavar="RUN_B", help="the run compared with the reference; "
                         "the table is written to <run_b>/compare-<run_a name>.csv")
    _reports_option(compare)
    compare.set_defaults(func=_cmd_compare)
    _planner_verbs(sub)
    _history_verbs(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the verb; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.func(args)
        sys.stdout.flush()
    except (RunFolderError, PlannerError, HistoryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MISSING
    except BrokenPipeError:
        # The reader went away (`runs | head`): end quietly. Python's own flush at exit would
        # fail again on the closed pipe, so stdout now points at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return status


# -- the planner's verbs: fit and plan --------------------------------------------------------

_HELP["fit"] = (
    "fit the planner's cost model to measured runs",
    "Fit the physical parameters of the planner's cost model (compute per chunk, small-GEMM\n"
    "loss, bus bandwidth and latency per span, stage sync, P2P, boot time, memory) to the\n"
    "valid rounds of one or more run folders (or points files such as\n"
    "benchmarks/data/seeds_medians.csv). Writes the fitted profile, with the 90 % interval of\n"
    "every parameter, to <first RUN>/planner/profile.json (or --out), prints the parameters\n"
    "and names those the data cannot identify. Runs of different models or images are refused.",
    "examples:\n  python -m pytest_ppsweep fit reports/kimi3-pp-20261201-090656\n"
    "  python -m pytest_ppsweep fit benchmarks/data/seeds_medians.csv --out seeds-profile.json")
_HELP["plan"] = (
    "predict every layout with 90 %% intervals",
    "Predict Input TPS, TTFT p50/p95, worst-rank memory and boot time, each with its 90 %\n"
    "interval, for every layout the cluster can run (PP x TP = its GPUs, every EP dividing TP)\n"
    "and each workload (default: the measured ones), beside the measured values where both\n"
    "exist. Written to planner/plan.csv next to the profile.",
    "examples:\n  python -m pytest_ppsweep plan --profile reports/kimi3-pp-20261201-090656\n"
    "  python -m pytest_ppsweep plan --profile seeds-profile.json --workload c=1 "
    "--workload c=8,input=32768")


def _print_misfit(trust: FitTrust) -> None:
    print(trust.summary())
    for line in trust.misfits:
        print(f"  misfit: {line}")


def _cmd_fit(args: argparse.Namespace) -> int:

    runs = [Path(r) if Path(r).exists() or "/" in r else resolve_run(r, args.reports)
            for r in args.runs]
    fitted = fit(load_measured(runs))
    first_dir = next((r for r in runs if r.is_dir()), None)
    out = args.out or (first_dir / PLANNER_PROFILE_JSON if first_dir else None)
    if out is None:
        raise PlannerError("fit: no run folder among the inputs: expected --out PATH for the "
                           "fitted profile, found none")
    fitted.write(out)
    layouts = len({(o["pp"], o["tp"], o["ep"]) for o in fitted.measured})
    print(f"fitted on {len(fitted.measured)} point(s) of {layouts} layout(s) from "
          f"{', '.join(fitted.sources)}")
    for line in parameter_lines(fitted):
        print(line)
    missing = fitted.unidentified()
    if missing:
        print(f"not identified by these data ({len(missing)}): {', '.join(missing)} "
              "(their values are the prior's; predictions that depend on them are wide)")
    print(f"fitted profile: {out}")
    trust = fit_trust(fitted)
    if not trust.trusted:
        _print_misfit(trust)
        if first_dir is not None:  # no predictions from a fit that misses its own points
            (first_dir / PLAN_CSV).unlink(missing_ok=True)
        return 1
    if first_dir is not None:
        run_layouts = [(str(f["config_id"]), int(f["pp"]), int(f["tp"]), int(f["ep"]))
                       for f in fitted.layouts]
        plan = write_plan_csv(first_dir / PLAN_CSV,
                              plan_rows(fitted, layouts=run_layouts or None))
        print(f"predicted vs measured: {plan} (the report's planner section)")
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:

    path = Path(args.profile)
    if not path.exists() and "/" not in args.profile:  # a run id or a prefix of one
        path = resolve_run(args.profile, args.reports)
    fitted = load_fitted(path)
    trust = fit_trust(fitted)
    if not trust.trusted:
        _print_misfit(trust)
        return 1
    workloads = [parse_workload(w) for w in args.workload or ()]
    rows = plan_rows(fitted, workloads)
    for line in plan_lines(rows, width=None if args.all else _WIDTH):
        print(line)
    where = path / PLANNER_DIR if path.is_dir() else path.parent
    print(f"plan: {write_plan_csv(args.csv or where / PLAN_CSV_NAME, rows)}")
    return 0


def _planner_verbs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fit_p = _sub(sub, "fit")
    fit_p.add_argument("runs", nargs="+", metavar="RUN",
                       help="run folders (a path or an id in the reports folder) or points files")
    fit_p.add_argument("--out", type=Path, default=None, metavar="PATH",
                       help="where to write the fitted profile (default RUN/planner/profile.json)")
    _reports_option(fit_p)
    fit_p.set_defaults(func=_cmd_fit)
    plan_p = _sub(sub, "plan")
    plan_p.add_argument("--profile", required=True, metavar="FITTED",
                        help="a fitted profile (JSON) or a run folder that holds planner/")
    plan_p.add_argument("--workload", action="append", metavar="c=N[,input=N][,requests=N]",
                        help="a workload to predict (repeatable; default: the measured ones)")
    plan_p.add_argument("--all", action="store_true",
                        help="every column and every layout (a wide table); default: the "
                        "layouts ranked by predicted Input TPS in 100 columns")
    plan_p.add_argument("--csv", type=Path, default=None, metavar="PATH",
                        help="where to write the table (default: planner/plan.csv beside the "
                        "profile)")
    _reports_option(plan_p)
    plan_p.set_defaults(func=_cmd_plan)


_HELP["history"] = (
    "the run history: repair it, or --rebuild it from the run folders",
    "Every finished run is indexed in <reports>/history.sqlite (run id, sweep, image,\n"
    "cluster, versions, status, per-point medians and intervals, correctness, accuracy). It\n"
    "is a cache of the run folders: without --rebuild, folders not indexed or changed since\n"
    "are read again (what `runs`, `compare` and `trend` do first); with --rebuild every row\n"
    "is made anew from the folders (deleting the file loses nothing).",
    "examples:\n  python -m pytest_ppsweep history --rebuild\n"
    "  python -m pytest_ppsweep history --reports /data/ppsweep/reports")
_HELP["trend"] = (
    "each point's metric across images and dates",
    "Per point (layout x C) of the sweep's runs in the history, one line per run, oldest\n"
    "first: date, image, the median of its valid repeats and the point's own interval of its\n"
    "geometric mean (at the run's alpha, stats/decision.py), the repeats and the run id.",
    "examples:\n  python -m pytest_ppsweep trend kimi3-pp\n"
    "  python -m pytest_ppsweep trend kimi3-pp --layout pp8-tp4-ep4 --metric ttft_p50")


def _history_verbs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hist = _sub(sub, "history")
    hist.add_argument("--rebuild", action="store_true",
                      help="make every row anew from the run folders")
    _reports_option(hist)
    hist.set_defaults(func=_cmd_history)
    trend = _sub(sub, "trend")
    trend.add_argument("sweep", metavar="SWEEP", help="the sweep's name ([sweep] name)")
    trend.add_argument("--layout", default=None, metavar="LAYOUT",
                       help="one layout (or point id) only, e.g. pp8-tp4-ep4")
    trend.add_argument("--metric", default="input_tps", metavar="METRIC",
                       help=f"one of {', '.join(METRICS)} (default input_tps)")
    _reports_option(trend)
    trend.set_defaults(func=_cmd_trend)
    bis = _sub(sub, "bisect")
    bis.add_argument("--good", required=True, metavar="IMAGE", help="the last image known good")
    bis.add_argument("--bad", required=True, metavar="IMAGE", help="an image known to regress")
    bis.add_argument("--images", required=True, metavar="FILE_OR_LIST",
                     help="the ordered images, oldest first: a file (one per line) or a "
                     "comma-separated list; --good and --bad among them")
    bis.add_argument("--sweep", default="test_matrix", metavar="FOLDER",
                     help="the sweep folder pytest runs (its ppsweep.toml; default test_matrix)")
    bis.add_argument("--threshold", action="append", metavar="METRIC:±N%",
                     help="the gate's thresholds (as --ppsweep-threshold; default "
                     f"{', '.join(DEFAULT_THRESHOLDS)})".replace("%", "%%"))
    bis.add_argument("--pytest-arg", action="append", metavar="ARG",
                     help="one more argument for each gate run's pytest (repeatable), e.g. "
                     "--pytest-arg=--ppsweep-repeats=3")
    bis.add_argument("--timeout", default=3600, type=float, metavar="S",
                     help="seconds one gate run may take (default 3600)")
    _reports_option(bis)
    bis.set_defaults(func=_cmd_bisect)


_HELP["bisect"] = (
    "find the first image of an ordered list that regressed",
    "Bisect an ordered list of images (oldest first) between a good and a bad one with the\n"
    "gate's own measurement and comparison (gate/bisect.py): the points that regressed from\n"
    "--good to --bad are measured for the image halfway (a gate run of the sweep with\n"
    "--ppsweep-image, only the regressed layouts), judged against the good image's run, and\n"
    "the range halved until the first bad image is found. Runs of an image already in the\n"
    "history (reports/history.sqlite) are reused; an image that does not boot is reported and\n"
    "skipped. Prints the first bad image with its gate rows against the good and the last good\n"
    "image. Exit status 0 when a first bad image was found, 1 when none.",
    "examples:\n  python -m pytest_ppsweep bisect --good reg/server:v1 --bad reg/server:v8 "
    "--images images.txt --sweep test_matrix\n"
    "  python -m pytest_ppsweep bisect --good a:1 --bad a:4 --images a:1,a:2,a:3,a:4 "
    "--threshold input_tps:-3%")


def _sweep_name(folder: Path) -> str:
    matrix = folder / "ppsweep.toml" if folder.is_dir() else folder
    try:
        raw = tomllib.loads(matrix.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RunFolderError(f"--sweep {folder}: cannot read {matrix} ({exc})") from exc
    name = raw.get("sweep", {}).get("name") if isinstance(raw.get("sweep"), dict) else None
    if not isinstance(name, str) or not name:
        raise RunFolderError(f"{matrix}: key 'sweep.name': expected the sweep's name, found "
                             "nothing")
    return name


def _cmd_bisect(args: argparse.Namespace) -> int:
    reports = Path(args.reports)
    sweep_dir = Path(args.sweep)
    try:
        thresholds = parse_thresholds(args.threshold or [])
        images = read_images(args.images)
        runner = GateRunner(sweep_dir.parent if sweep_dir.is_file() else sweep_dir, reports,
                            _sweep_name(sweep_dir), tuple(args.threshold or ()),
                            tuple(args.pytest_arg or ()), float(args.timeout))
        outcome = search(images, args.good, args.bad, runner, thresholds)
    except (BisectError, ThresholdError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MISSING
    print("\n".join(outcome.lines()))
    return 0 if outcome.first_bad is not None else 1
