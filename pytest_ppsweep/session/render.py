"""What the session shows at the end: the sweep summary on the terminal and in pytest-html's
report (computed by finish; rendered here)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep.report import summary

if TYPE_CHECKING:
    from pytest_ppsweep.folder.runfolder import RunStore
    from pytest_ppsweep.session.noboot import QuietRun
    from pytest_ppsweep.session.progress import Progress
    from pytest_ppsweep.session.runstate import RunState
    from pytest_ppsweep.session.xdist import Xdist

__all__ = ["NO_HTML", "Render"]

NO_HTML = (
    "ppsweep: pytest-html is not active (-p no:html): no HTML report; the run folder has every "
    "table"
)


class Render:
    """The render hooks: they show what the session's finish computed (``rendered``, and what
    saving the baseline said)."""

    def __init__(self, config: pytest.Config, state: RunState, quiet: QuietRun, xdist: Xdist,
                 store: RunStore, compare_ref: Path | None, progress: Progress) -> None:
        self.config = config
        self.state = state
        self.quiet = quiet
        self.xdist = xdist
        self.store = store
        self.compare_ref = compare_ref
        self.progress = progress
        self.rendered: summary.Rendered | None = None  # set by the session's finish
        self.baseline: list[str] = []  # what saving the baseline said

    def html_summary(self, prefix: list[str]) -> None:
        if self.rendered is not None:
            prefix.extend(self.rendered.html)

    def terminal(self, reporter: Any) -> None:
        if self.state.worker:
            return
        self.progress.clear_line()
        if self.state.quiet or self.state.is_refused:  # nothing ran: the dry run's plan, or
            self.quiet.terminal(reporter)               # the folder kept
            return
        for config_id, why in self.xdist.not_run.items():
            reporter.write_line(f"NOT RUN {config_id}: {why}", red=True)
        result = self.rendered or summary.Rendered(terminal=["no summary: the run did not end"])
        reporter.write_sep("=", f"ppsweep summary: {self.store.run_id}")
        for line in result.terminal:
            reporter.write_line(line)
        if result.gate:
            reporter.write_sep("=", f"ppsweep gate vs {self.compare_ref}")
            for line in result.gate:
                reporter.write_line(line, red=line.startswith(("REGRESSION", "INCONCLUSIVE")))
        reporter.write_line(f"run folder: {self.store.dir}")
        html = self.config.getoption("htmlpath", None)
        if not self.config.pluginmanager.hasplugin("html"):
            reporter.write_line(NO_HTML)
        elif html:
            reporter.write_line(f"report: {Path(html).resolve()}")
        for line in self.baseline:
            reporter.write_line(line)
