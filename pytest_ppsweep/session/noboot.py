"""Runs in which nothing boots: ``--ppsweep-dry-run``, ``--collect-only``, a selection that
matches no point, and a run refused before its first boot. The first three read the sweep file
and the reports folder, and nothing else: no node is connected to (no preflight, no slurm
allocation, no final reap) and no run folder is left behind.

``--collect-only`` and the dry run are known at configure: the run's files go to a scratch
folder, removed at the end, and pytest-html is given no report path. An empty selection is known
only after collection: the run folder made at configure is removed at the end and pytest-html's
report object is unregistered, so it writes nothing into it. A run stopped by a usage error
before anything ran (its claim on a cluster refused, a node refused by the preflight, its slurm
allocation not granted) is treated the same: the error alone, no summary, no report, no run
folder; so is one interrupted (Ctrl-C, SIGTERM) while it waited for its claim or allocation.
Only a folder this process made is removed: a resumed run's, or an earlier folder named
again by ``--ppsweep-run-id``, is kept as it was (nothing is closed or summarised into it).

The dry run prints, per selected point, every node's
launch command and environment (:mod:`pytest_ppsweep.report.dryrun`) and the selection's notes;
first it checks the server flags without a connection (``cluster.preflight.dry_run_flags``:
the server's own parser where the engine runs on this machine or is the emulator, else the
engine version's kept flag list; its line, first, says which), and a mistake is a usage error.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.report.dryrun import dry_run_lines
from pytest_ppsweep.session import options
from pytest_ppsweep.session.runstate import Quiet, RunState

if TYPE_CHECKING:
    from pytest_ppsweep.folder.runfolder import RunStore
    from pytest_ppsweep.run.context import RunContext

__all__ = ["QuietRun", "dry_run_requested", "quiet_at_start", "scratch_folder"]


def dry_run_requested(config: pytest.Config) -> bool:
    """``--ppsweep-dry-run`` (or its ini key): then pytest only collects, quietly."""
    asked = bool(config.getoption("ppsweep_dry_run", False) or config.getini("ppsweep_dry_run"))
    if asked:
        config.option.collectonly = True
        config.option.verbose = min(config.option.verbose, -2)  # the plan, not every test id
    return asked


def scratch_folder(config: pytest.Config, worker: bool) -> Path | None:
    """Where a run that boots nothing keeps its files meanwhile (None: a run that may boot)."""
    if worker or not config.option.collectonly:
        return None
    return Path(tempfile.mkdtemp(prefix="ppsweep-quiet-"))


def quiet_at_start(state: RunState, scratch: Path | None, dry_run: bool) -> None:
    """A run known at configure to boot nothing (a scratch folder: --collect-only or the dry
    run) is quiet from the start."""
    if scratch is not None:
        state.go_quiet(Quiet.DRY_RUN if dry_run else Quiet.COLLECT_ONLY)


class QuietRun:
    """The session's handling of a run in which nothing boots. ``scratch``: the folder a run
    known to be quiet at configure keeps its files in (None otherwise)."""
    def __init__(self, config: pytest.Config, state: RunState, store: RunStore,
                 scratch: Path | None) -> None:
        self.config = config
        self.state = state
        self.store = store
        self.scratch = scratch
        self.plan_lines: list[str] = []  # what the dry run prints

    def nothing_selected(self) -> None:
        """The selection matches no point: nothing will boot. A run folder this process made
        is removed at the end (under xdist by the controller, once its workers ended), and
        pytest-html writes no report into it."""
        if self.state.quiet or not self.state.made_folder:
            return
        self.state.go_quiet(Quiet.EMPTY)
        self._no_report()

    @contextmanager
    def refusal(self) -> Iterator[None]:
        """A usage error inside (a refused claim or node, an allocation not granted), or a
        Ctrl-C/SIGTERM while it waits (a pending slurm allocation, a claim waited for), stops
        the run before anything ran: no summary and no report (a resumed run's report.html stays
        as it was); the run folder this process made goes."""
        try:
            yield
        except (pytest.UsageError, KeyboardInterrupt):
            self.state.refused()
            self._no_report()
            raise

    def _no_report(self) -> None:
        """pytest-html writes nothing (its report object unregistered)."""
        if self.config.pluginmanager.hasplugin("html"):
            from pytest_html.basereport import BaseReport

            for plugin in list(self.config.pluginmanager.get_plugins()):
                if isinstance(plugin, BaseReport):
                    self.config.pluginmanager.unregister(plugin)
        self.config.option.htmlpath = None

    def run_dir_for_lookups(self) -> Path:
        """Where earlier runs are looked for: beside this run's folder, in the reports folder
        also when this run's files are in a scratch folder."""
        if self.scratch is not None:
            return options.reports_root(self.config) / self.store.run_id
        return self.store.dir

    def plan_dry_run(self, ctx: RunContext, ids: list[str], points: dict[str, set[int]],
                     notes: list[str]) -> None:
        """The dry run's lines for the selected points, on every cluster of the pool."""
        if not self.state.dry_run:
            return
        from pytest_ppsweep.cluster import preflight

        sweep = ctx.sweep
        chosen = [sweep.config(i) for i in ids if i in points]
        with Registry() as registry:  # one read of the server's parser per image
            for cluster in ctx.clusters.all:
                # A flag typo is found before any boot, without a connection (the line says
                # which check was made, and where the preflight checks them again).
                problems, flags_line = preflight.dry_run_flags(sweep, cluster, registry)
                if problems:
                    found = preflight.message(cluster, problems)
                    raise pytest.UsageError(f"--ppsweep-dry-run: {found}")
                self.plan_lines += dry_run_lines(sweep, cluster, chosen,
                                                 options.reports_root(self.config), points,
                                                 flags_line)
        self.plan_lines += notes

    def terminal(self, reporter: Any) -> None:
        """What a quiet run shows at the end: the dry run's plan, the folder a refused run
        kept, or nothing at all."""
        if self.state.is_refused and not self.state.quiet:
            reporter.write_line(f"run folder {self.store.dir}: kept as it was (nothing ran)")
        if self.plan_lines:
            reporter.write_sep("=", "ppsweep dry run")
        for line in self.plan_lines:
            reporter.write_line(line)

    def remove_scratch(self) -> None:
        """At close: the scratch folder (or the run folder this process made and the run did
        not use) goes."""
        folder = self.scratch
        if folder is None and self.state.forgets_folder:
            folder = self.store.dir
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
