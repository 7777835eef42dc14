"""Glue between the run folder and what the plugin shows: HTML summary, terminal, table columns.

The numbers come only from the files in the run folder (aggregate.py), so the report a run shows
is the one ``python -m pytest_ppsweep report <run>`` rebuilds.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_ppsweep.measure.runstore import RunStore

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


def finish(
    store: RunStore,
    order: list[str],
    not_run: dict[str, str],
    compare_ref: Path | None,
    thresholds: dict[str, Any],
) -> Rendered:
    """Close the run folder (not-run layouts, sweep order, benchmark.json) and render it."""
    from pytest_ppsweep import gate
    from pytest_ppsweep.gate import benchjson

    for config_id, why in not_run.items():
        store.update_config(config_id, boot_error=f"not run: {why}")
    store.sort_results(order)
    if store.results_csv.exists():
        benchjson.write_benchmark_json(store.dir)
    rendered = render(store.dir)
    if compare_ref is not None:
        rows = gate.compare(store.dir, compare_ref, thresholds)
        gate.write_comparison_csv(store.dir, rows)
        rendered.html.append(gate.comparison_html(rows))
        rendered.gate = gate.comparison_table(rows, width=100) + gate.notable_lines(rows)
        _gate_differs(store.dir, compare_ref, rows, rendered)
    return rendered


def _gate_differs(run_dir: Path, ref: Path, rows: list[Any], rendered: Any) -> None:
    """The gate's deltas with the manifest fields each point differs in from the reference
    (gate/differs.py): gate.csv's ``differs`` column, a table and terminal lines."""
    from pytest_ppsweep.gate import differs

    ids = [r.config_id for r in rows]
    differs.add_differs_column(run_dir, ref)
    rendered.html.append(differs.differs_html(run_dir, ref, ids))
    rendered.gate += differs.differs_lines(run_dir, ref, ids)


def lift_answers(html_path: str | None) -> None:
    """pytest-html's page, once written: the answers (and the SIMULATED banner) moved above
    its title and environment (report/answers.py)."""
    from pytest_ppsweep.report.answers import lift

    if html_path:
        lift(Path(html_path))


def save_baseline(store: RunStore, name: str, root: Path, exitstatus: int) -> list[str]:
    """Save the run as a named baseline, only when every test passed."""
    from pytest_ppsweep.gate.baselines import BaselineError
    from pytest_ppsweep.gate.baselines import save_baseline as save

    if exitstatus != 0:
        return [f"baseline {name!r} not saved: the run did not pass (exit status {exitstatus})"]
    try:
        return [f"baseline {name!r} saved: {save(store.dir, name, root)}"]
    except BaselineError as exc:
        return [f"baseline {name!r} not saved: {exc}"]


def render(run_dir: Path) -> Rendered:
    """Aggregate the run folder, write summary.csv, and render the HTML and terminal summary."""
    from pytest_ppsweep.report.comm import comm_html, comm_terminal
    from pytest_ppsweep.report.html import analyse, html_summary, save
    from pytest_ppsweep.report.terminal import terminal_summary
    from pytest_ppsweep.results.aggregate import RunFolderError

    try:
        data, summary, verdicts, rec = analyse(run_dir)
    except RunFolderError as exc:
        note = f"no summary: {exc}"
        # test_comm alone (the service never booted): the §9.2 section is still the report's
        comm = comm_html(run_dir)
        return Rendered([f"<p>{html.escape(note)}</p>", *([comm] if comm else [])],
                        [note, *comm_terminal(run_dir)])
    save(data, summary, rec)
    return Rendered(
        html_summary(data, summary, verdicts, rec),
        terminal_summary(summary, verdicts, rec, width=100) + planner_lines(run_dir)
        + comm_terminal(run_dir),
    )


def planner_lines(run_dir: Path) -> list[str]:
    """The planner's predicted-vs-measured table, where the run folder has a plan."""
    from pytest_ppsweep.report.plannerview import terminal_lines

    return terminal_lines(run_dir)
