"""What the session shows at the end: the sweep summary on the terminal and in pytest-html's
report (computed by finish; rendered here)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ppsweep.report import summary
from pytest_ppsweep.session.quiet import Quiet

if TYPE_CHECKING:
    from pytest_ppsweep.pool.lease import Pool

__all__ = ["NO_HTML", "Render"]

NO_HTML = (
    "ppsweep: pytest-html is not active (-p no:html): no HTML report; the run folder has every "
    "table"
)


class Render(Quiet):
    """The render hooks: they show what :meth:`finish` computed."""

    leases: Pool | None
    rendered: summary.Rendered | None
    baseline: list[str]

    def html_summary(self, prefix: list[str]) -> None:
        if self.rendered is not None:
            prefix.extend(self.rendered.html)

    def terminal(self, reporter: Any) -> None:
        if self.worker:
            return
        self.progress.clear_line()
        if self.quiet or self.refused:  # nothing ran: the dry run's plan, or the folder kept
            self.quiet_terminal(reporter)
            return
        for config_id, why in self.leases.not_run.items() if self.leases else ():
            reporter.write_line(f"NOT RUN {config_id}: {why}", red=True)
        result = self.rendered or summary.Rendered(terminal=["no summary: the run did not end"])
        reporter.write_sep("=", f"ppsweep summary: {self.store.run_id}")
        for line in result.terminal:
            reporter.write_line(line)
        if result.gate:
            reporter.write_sep("=", f"ppsweep gate vs {self.compare_ref}")
            for line in result.gate:
                reporter.write_line(line, red=line.startswith("REGRESSION"))
        reporter.write_line(f"run folder: {self.store.dir}")
        html = self.config.getoption("htmlpath", None)
        if not self.config.pluginmanager.hasplugin("html"):
            reporter.write_line(NO_HTML)
        elif html:
            reporter.write_line(f"report: {Path(html).resolve()}")
        for line in self.baseline:
            reporter.write_line(line)

