"""What the plugin shows of a run folder: HTML summary, terminal, table columns (it only renders;
``run.close`` closes the folder).

The numbers come only from the files in the run folder (aggregate.py), so the report a run shows
is the one ``python -m pytest_ppsweep report <run>`` rebuilds.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ppsweep import gate
from pytest_ppsweep.folder.runfolder import FolderFiles, FolderSource
from pytest_ppsweep.gate import differs
from pytest_ppsweep.report import accuracyview, plannerview, sloview
from pytest_ppsweep.report.commview import comm_html, comm_terminal
from pytest_ppsweep.report.format import fit_table, wrap_lines
from pytest_ppsweep.results.sloanswer import answers_of
from pytest_ppsweep.results.status import RESUME_PREFIX, RunStatus

if TYPE_CHECKING:
    from pytest_ppsweep.results.pipeline import Analysis

TABLE_HEADER = [
    '<th class="sortable" data-column-type="config">Configuration</th>',
    '<th class="sortable" data-column-type="c">C</th>',
    '<th class="sortable" data-column-type="tps">Input TPS</th>',
    '<th class="sortable" data-column-type="ttft">TTFT p50 (s)</th>',
]


# pytest-html sorts its results table by this column first (``initial_sort``), so a layout's
# tests stand together, layouts in PP, TP, EP order, the tests of no layout last.
INITIAL_SORT = "config"
_LAYOUT = re.compile(r"pp(\d+)-tp(\d+)(?:-ep(\d+))?")


def layout_key(config_id: Any) -> str:
    """The hidden sort key of a Configuration cell: PP, TP and EP zero-padded (``pp16`` after
    ``pp8``), then the id; ``~`` (after every layout) for a test of no layout."""
    if config_id is None or config_id == "":
        return "~"
    text = str(config_id)
    match = _LAYOUT.match(text)
    sizes = "".join(f"{int(n or 0):05d}" for n in match.groups()) if match else "99999" * 3
    return f"{sizes}-{text}"


def table_row(props: dict[str, Any]) -> list[str]:
    """The cells of TABLE_HEADER for one test report (values from its user_properties)."""
    def cell(col: str, value: Any) -> str:
        text = "" if value is None else html.escape(str(value))
        if isinstance(value, float):
            # pytest-html sorts a column by the cell's HTML as a string: a hidden zero-padded
            # key first makes 900.00 sort before 10,000.00.
            text = f"<span hidden>{value:020.4f}</span>{value:,.2f}"
        return f'<td class="col-{col}">{text}</td>'

    config = props.get("ppsweep_config")
    key = f"<span hidden>{html.escape(layout_key(config))}</span>"
    return [
        cell("config", config).replace('">', '">' + key, 1),
        cell("c", props.get("concurrency")),
        cell("tps", props.get("input_tps")),
        cell("ttft", props.get("ttft_p50_s")),
    ]


@dataclass
class Rendered:
    """What the plugin shows at the end of a run."""
    html: list[str] = field(default_factory=list)
    terminal: list[str] = field(default_factory=list)
    gate: list[str] = field(default_factory=list)


def render(run_dir: Path, analysis: Analysis | None = None, note: str = "",
           width: int = 100) -> Rendered:
    """The HTML and terminal summary of a run folder, from its analysis (the one
    ``run.close`` computed, else made here) or the note that says why there is none; the
    terminal's lines at most ``width`` wide (its tables wrap). The folder's other files are
    read once here and handed to every view."""
    from pytest_ppsweep.report.html import html_summary
    from pytest_ppsweep.results.aggregate import RunFolderError
    from pytest_ppsweep.results.pipeline import analyse

    if analysis is None and not note:
        try:
            analysis = analyse(run_dir)
        except RunFolderError as exc:
            note = f"no summary: {exc}"
    files = (analysis[0].files if analysis is not None else None) or FolderFiles.of(run_dir)
    if analysis is None:
        # test_comm alone (the service never booted): the §9.2 section is still the report's
        comm = comm_html(files)
        slo = slo_html(files)  # an SLO search alone (-k slo) still answers
        acc = accuracyview.html_section(files)  # the accuracy check alone (-k accuracy)
        return Rendered([f"<p>{html.escape(note)}</p>", *(x for x in (slo, acc, comm) if x)],
                        [note, *slo_answer_lines(files, width), *slo_lines(files, width),
                         *accuracyview.terminal_lines(files, width), *comm_terminal(files, width)])
    data, summary, verdicts, rec = analysis
    return Rendered(html_summary(data, summary, verdicts, rec, files),
                    terminal_lines(analysis, files, width))


def terminal_lines(analysis: Analysis, files: FolderFiles, width: int = 100) -> list[str]:
    """The terminal summary of an analysed run: the medians with their verdicts and the answers,
    then its SLO searches, accuracy scores, planner table and communication, where the run has
    them. The run's end prints it, and ``show`` prints it again from the folder."""
    from pytest_ppsweep.report.terminal import terminal_summary

    _, summary, verdicts, rec = analysis
    return (terminal_summary(summary, verdicts, rec, width=width) + slo_lines(files, width)
            + accuracyview.terminal_lines(files, width) + planner_lines(files, width)
            + comm_terminal(files, width))


def status_lines(status: RunStatus, width: int) -> list[str]:
    """The run's status lines for a terminal ``width`` wide: each wrapped (nothing cut), but
    the resume command whole on its one line, to be copied as it is."""
    return [part for line in status.lines()
            for part in ([line] if line.startswith(RESUME_PREFIX) else wrap_lines([line], width))]


def slo_html(run_dir: FolderSource) -> str:
    """The report's SLO block ("" without an SLO search)."""
    return sloview.html_section(run_dir)


def slo_answer_lines(run_dir: FolderSource, width: int = 100) -> list[str]:
    """The Answers block of a run with no sweep summary (an SLO search alone, ``-k slo``): its
    SLO answers, as the Answers block shows every answer (report/answerview.py)."""
    from pytest_ppsweep.report.answerview import terminal_lines

    return terminal_lines(answers_of(run_dir), width=width)


def slo_lines(run_dir: FolderSource, width: int | None = None) -> list[str]:
    """Each layout's SLO search and the Pareto front, where the run searched an SLO (the
    answers are the Answers block's); within ``width`` when given."""
    return sloview.terminal_lines(run_dir, width)


def gate_table(rows: list[Any], width: int = 100) -> list[str]:
    """The gate as terminal lines of at most ``width`` characters: per point its speed rows, per
    layout its ``outputs`` and ``accuracy`` rows (a table that does not fit wraps, as the live
    summary's does: report/format.fit_table; nothing is cut), one line for the outputs and one
    for the task scores, whether or not they were compared, then a count line."""
    titles = gate.TABLE_TITLES
    table = fit_table(titles, gate.table_rows(rows), width, key=3,
                      align="<><<" + ">" * (len(titles) - 4))
    return table + wrap_lines([*gate.correctness_lines(rows), gate.verdict_counts(rows)], width)


def render_gate(run_dir: Path, ref: Path, rows: list[Any], rendered: Rendered) -> None:
    """The gate's verdicts vs ``ref`` added to ``rendered``: its table and notable lines, and
    the manifest fields each point differs in from the reference (gate/differs.py)."""
    rendered.html.append(gate.comparison_html(rows))
    rendered.gate = gate_table(rows) + gate.notable_lines(rows)
    ids = [r.config_id for r in rows]
    rendered.html.append(differs.differs_html(run_dir, ref, ids))
    rendered.gate += differs.differs_lines(run_dir, ref, ids)


def planner_lines(run_dir: FolderSource, width: int = 100) -> list[str]:
    """The planner's predicted-vs-measured table, where the run folder has a plan, within
    ``width``."""
    return plannerview.terminal_lines(run_dir, width)


def lift_answers(html_path: str | None) -> None:
    """pytest-html's page, once written: the answers (and the SIMULATED banner) moved above
    its title and environment (report/answerview.py)."""
    if html_path:  # (a run without a page imports nothing: pandas costs ~0.5 s a process)
        from pytest_ppsweep.report.answerview import lift

        lift(Path(html_path))
