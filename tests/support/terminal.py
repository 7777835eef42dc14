"""A real terminal for the progress tests: a tmux session on a private server socket.

tmux comes from ``scripts/install_tmux.sh`` (what CI runs in scripts/test.sh). The screen is
read with ``tmux capture-pane`` while the command runs; nothing here sleeps to synchronise:
callers poll :meth:`Tmux.screen` with a deadline.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from support.paths import SCRIPTS

INSTALL_SCRIPT = SCRIPTS / "install_tmux.sh"


def tmux_missing() -> str | None:
    """None when tmux is usable, else why not (after trying the install script once)."""
    if shutil.which("tmux"):
        return None
    done = subprocess.run(
        ["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode == 0 and shutil.which("tmux"):
        return None
    return f"tmux is not available: {(done.stderr or done.stdout).strip()}"


class Tmux:
    """One detached tmux session of ``width`` × ``height`` running one command."""

    def __init__(self, name: str) -> None:
        self.socket = f"ppsweep-test-{name}-{os.getpid()}"
        self.session = "sweep"

    def _tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True, text=True, timeout=30, check=False,
        )

    def start(self, argv: Sequence[str | Path], cwd: Path, env: dict[str, str],
              width: int = 150, height: int = 40, log: Path | None = None) -> None:
        """Run ``argv`` in the terminal; its exit status is printed as ``__EXIT__ <rc>`` and
        the pane stays, so the last screen can be read."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
        command = " ".join(shlex.quote(str(a)) for a in argv)
        # The tmux server copies this process's environment: a COLUMNS or LINES in it (pytest
        # runs set COLUMNS=80) would hide the terminal's real size from the program.
        script = (
            f"cd {shlex.quote(str(cwd))} && env -u COLUMNS -u LINES {exports} {command}; "
            "echo __EXIT__ $?"
        )
        done = self._tmux(
            "-f", "/dev/null", "new-session", "-d", "-s", self.session,
            "-x", str(width), "-y", str(height), f"bash -c {shlex.quote(script)}; exec cat",
        )
        if done.returncode != 0:
            raise RuntimeError(f"tmux new-session failed: {done.stderr}")
        self._tmux("set-option", "-t", self.session, "history-limit", "5000")
        if log is not None:  # every byte the program wrote to the terminal
            self._tmux("pipe-pane", "-t", self.session, "-o", f"cat >> {shlex.quote(str(log))}")

    def screen(self) -> str:
        """What the terminal shows now (the visible 40 lines)."""
        return self._tmux("capture-pane", "-p", "-t", self.session).stdout

    def history(self) -> str:
        """Every line the pane holds, scrolled off or not."""
        return self._tmux("capture-pane", "-p", "-S", "-", "-t", self.session).stdout

    def size(self) -> str:
        return self._tmux(
            "display-message", "-p", "-t", self.session, "#{pane_width}x#{pane_height}"
        ).stdout.strip()

    def kill(self) -> None:
        self._tmux("kill-server")
