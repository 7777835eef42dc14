"""Progress of long steps (boot waits, rounds) for the person watching the terminal.

Lines go to the terminal at once, past output capturing, and to ``progress.log`` in the run
folder, so a run that is watched later tells the same story.
"""

from __future__ import annotations

import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest


class Progress:
    """Callable that reports one progress line."""

    def __init__(self, config: pytest.Config, log_path: Path) -> None:
        self._config = config
        self._log_path = log_path
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        stamp = datetime.now().strftime("%H:%M:%S")
        line = f"[ppsweep {stamp}] {message}"
        with self._lock:
            with self._log_path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            reporter = self._config.pluginmanager.get_plugin("terminalreporter")
            if hasattr(self._config, "workerinput"):
                # xdist workers have no terminal; their stderr reaches the controller's log.
                sys.stderr.write(line + "\n")
            elif reporter is not None and self._config.get_verbosity() >= 0:
                reporter.write_line(line)
