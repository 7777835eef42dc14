"""The end of a run: the run folder closed once (not-run layouts in configs.csv, results.csv in
sweep order, benchmark.json, summary.csv, answers.json, the gate's gate.csv) and saved as a
named baseline when every test passed. What it computed is handed to ``report.summary`` to
render; nothing here renders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ppsweep import gate
from pytest_ppsweep.folder.runfolder import RunJson, RunKey, RunStore
from pytest_ppsweep.measure.configrow import ConfigRow
from pytest_ppsweep.results.runstatus import RunStatus
from pytest_ppsweep.results.sloanswer import write_if_absent

if TYPE_CHECKING:
    from pytest_ppsweep.gate.comparison import Comparison
    from pytest_ppsweep.results.aggregate import RunData
    from pytest_ppsweep.results.pipeline import Analysis

__all__ = ["Closed", "close", "save_baseline", "summarize"]


@dataclass(frozen=True)
class Closed:
    """What closing the run folder computed: the run's analysis (None, with the ``note`` that
    says why, when the folder has no rounds to summarise) and the gate's rows (None without a
    reference run)."""
    run_dir: Path
    analysis: Analysis | None
    note: str
    gate: list[Comparison] | None
    # why the run was not indexed in the history, or its boot-to-boot variance not read ("":
    # both were)
    history_note: str = ""


def close(
    store: RunStore,
    order: list[str],
    not_run: Mapping[str, str],
    compare_ref: Path | None,
    thresholds: dict[str, Any],
    status: RunStatus | None = None,
) -> Closed:
    """Close the run folder: not-run layouts, sweep order, benchmark.json, the run's status in
    run.json, summary.csv and answers.json (qualified by the status: results/runstatus.py),
    with a reference run gate.csv with the fields each point differs in, and last the run's
    rows in the reports folder's history (gate/history.py; a failure is a warning line). The
    folder's results are read once, then handed to each of them."""
    from pytest_ppsweep.gate import benchjson, differs
    from pytest_ppsweep.gate.history import boot_noise_at_close, index_at_close
    from pytest_ppsweep.results.aggregate import load_run

    for config_id, why in not_run.items():
        ConfigRow(store, config_id).not_run(why)
    store.fold_configs()  # every fact the run's processes learnt, in configs.csv
    store.sort_results(order)
    if status is not None:  # before the folder is read: what is read of run.json is final
        RunJson(store).run_status(status.status, status.detail())
        store.clear_live()  # no process of the run is busy any more
    data = None
    if store.results_csv.exists():
        data = load_run(store.dir)
        benchjson.write_benchmark_json(store.dir, run=data)
    # Before the answers: the boot-to-boot variance earlier runs measured, in run.json and in
    # what was read of it (a warning only: without it the answers say what their level is).
    boot, boot_note = boot_noise_at_close(store, data.run_json if data is not None else None)
    if boot and data is not None:
        data = replace(data, run_json={**data.run_json, RunKey.BOOT_HISTORY: boot})
    analysis, note = summarize(store.dir, data, status)
    if analysis is None:  # no summary: the SLO answers alone (the pipeline writes every kind's)
        write_if_absent(store.dir, store.run_id)
    rows = None
    if compare_ref is not None:
        rows = gate.compare(store.dir, compare_ref, thresholds, current=data)
        gate.write_comparison_csv(store.dir, rows)
        differs.add_differs_column(store.dir, compare_ref)  # gate.csv's ``differs`` column
    # Last: the run history indexes the closed folder (a cache; a failure only warns).
    indexed = index_at_close(store.dir, analysis)
    return Closed(store.dir, analysis, note, rows, "; ".join(n for n in (boot_note, indexed) if n))


def summarize(run_dir: Path, data: RunData | None = None, status: RunStatus | None = None
              ) -> tuple[Analysis | None, str]:
    """Aggregate the run folder (``data``: what was read of it already), write summary.csv and
    answers.json (an interrupted or partial run's answers qualified by its ``status``); without
    rounds to aggregate, None and the note that says why."""
    from pytest_ppsweep.results.pipeline import run_pipeline

    return run_pipeline(run_dir, data, status)


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
