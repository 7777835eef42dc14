"""Progress of long steps (boot waits, rounds) for the person watching the terminal.

Two kinds of output, both past pytest's output capturing (as pytest's own live logging does:
the terminal reporter, with capturing suspended by the capture manager):

- **lines** (:meth:`Progress.__call__`): an event (``booting on``, ``healthy after``, a round's
  result), written as a timestamped line to the terminal and to ``progress.log``;
- **status** (:meth:`Progress.status`): the state of a running layout (its phase, elapsed /
  timeout, ranks ready, the newest log milestone; a round's bar). On a terminal it is one line
  rewritten in place (``\\r`` + clear to end of line) and cleared before pytest writes a test
  result (:meth:`Progress.clear_line`, called from the runtest log hooks). Each *change* of
  state (not each redraw) is also a timestamped line in ``progress.log``; without a terminal
  (output piped, ``-p no:terminal``) those lines are all the terminal gets, with no ``\\r``.

An xdist worker has no terminal: it writes its lines to the shared ``progress.log`` tagged
with its id (``[ppsweep 09:31:02 gw0] …``), and the controller follows that file with a small
thread (:meth:`Progress.follow_workers`) and shows the workers' lines on its terminal.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import pytest

from pytest_ppsweep.measure.eta import SweepClock
from pytest_ppsweep.service.logscan import LogFollower

__all__ = ["CLEAR", "WORKER_LINE", "Progress"]

CLEAR = "\r\x1b[K"  # back to column 0, clear to the end of the line
# A worker's line in progress.log: the controller shows these.
WORKER_LINE = re.compile(r"^\[ppsweep \d\d:\d\d:\d\d (gw\d+)\] ")


class Progress:
    """Progress lines and live status lines of one pytest process.

    ``redraw_s``: a status line is redrawn at most this often (a change of state at once);
    ``heartbeat_s``: an unchanged state is logged again after this long (a boot that waits
    minutes for its next milestone still shows it is alive where there is no live line).
    """

    def __init__(
        self,
        config: pytest.Config,
        log_path: Path,
        *,
        redraw_s: float = 0.2,
        heartbeat_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._log_path = log_path
        self._lock = threading.RLock()
        winput = getattr(config, "workerinput", None)
        self.worker: str | None = str(winput["workerid"]) if winput is not None else None
        # Created in pytest_configure, where capturing is suspended: the real streams. The
        # terminal reporter writes to this stdout too (raw status writes bypass its idea of
        # the current line, which stays "at column 0" as it is after a cleared status).
        self._stdout: TextIO = sys.stdout
        self._stderr: TextIO = sys.stderr
        # Asked now: while a test runs, fd 1 is pytest's capture file, no terminal.
        self._tty = self._stdout.isatty()
        self.redraw_s = redraw_s
        self.heartbeat_s = heartbeat_s
        self._clock = clock
        self._lines: dict[str, str] = {}  # key (layout) → its status text, in start order
        # The sweep's position and ETA (set once the selection is known: session.collection)
        self.sweep_clock: SweepClock | None = None
        self._states: dict[str, str] = {}  # key → the last state logged
        self._logged_at: dict[str, float] = {}
        self._drawn_at = float("-inf")
        self._open = False  # a status line is on the terminal (cursor at its end)
        self._row: Any = None  # the file of pytest's row of results a line of ours ended
        self._follower: threading.Thread | None = None
        self._stop = threading.Event()

    # -- where output goes ------------------------------------------------------------------

    def _reporter(self) -> Any:
        return self._config.pluginmanager.get_plugin("terminalreporter")

    @property
    def live(self) -> bool:
        """Status lines are rewritten in place: a terminal reporter on a TTY, not a worker."""
        if self.worker is not None:
            return False
        reporter = self._reporter()
        return bool(self._tty and reporter is not None and reporter.isatty())

    @contextlib.contextmanager
    def _uncaptured(self) -> Iterator[None]:
        # pytest's live logging does the same (_pytest/logging.py, _LiveLoggingStreamHandler).
        # Off the main thread (the controller's follower) nothing is captured: no suspending.
        capman = self._config.pluginmanager.get_plugin("capturemanager")
        if capman is None or threading.current_thread() is not threading.main_thread():
            yield
            return
        with capman.global_and_fixture_disabled():
            yield

    def _stamp(self, message: str) -> str:
        stamp = datetime.now().strftime("%H:%M:%S")
        tag = f"{stamp} {self.worker}" if self.worker else stamp
        head = f"[ppsweep {tag}] "
        if self.worker:  # every line tagged: the controller shows only tagged lines
            return "\n".join(head + part for part in message.split("\n"))
        return head + message

    def _log(self, line: str) -> None:
        with self._log_path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def _terminal_line(self, line: str, always: bool = False) -> None:
        """A plain line on the terminal (lock held), below any open status line's place;
        hidden by ``-q`` unless ``always`` (a warning that needs action)."""
        if self.worker is not None or (self._config.get_verbosity() < 0 and not always):
            return
        reporter = self._reporter()
        if reporter is None and self._config.pluginmanager.has_plugin("terminal"):
            return  # pytest_configure, before the terminal reporter exists: progress.log only
        with self._uncaptured():
            if reporter is None:  # -p no:terminal
                self._stderr.write(line + "\n")
                self._stderr.flush()
                return
            if self._open:
                self._raw(CLEAR)
                self._open = False
            self._end_row(reporter)
            # Under xdist the controller writes each result's letter without noting it as a
            # started line: the writer's own column says whether one is open. One write, so a
            # line the follower thread shows is not cut by the main thread's output.
            writer = self._config.get_terminal_writer()
            head = "\n" if writer.width_of_current_line else ""
            if self.live:  # a terminal wraps at its width, mid-word: wrapped here, at words
                line = "\n".join(event_lines(line, writer.fullwidth))
            reporter.write(head + line + "\n", flush=True)
            if self._lines and self.live:
                self._draw()

    def _end_row(self, reporter: Any) -> None:
        """End pytest's open row of result letters as pytest ends one (its ``[ NN%]`` at the
        right), so a line of ours below it leaves the row whole; the row is opened again
        (:meth:`_reopen`) before pytest writes its next letter."""
        if isinstance(reporter.currentfspath, Path):  # a row of letters (-v: a test's line)
            writer = self._config.get_terminal_writer()
            self._row = reporter.currentfspath
            # no letter in it yet (pytest opened it for the test that starts): taken back, and
            # opened again before the test's letter (the writer's idea of the line is private)
            if self.live and hasattr(writer, "_current_line") and \
                    writer.width_of_current_line <= len(self._row_name(reporter)) + 1:
                self._raw("\r\x1b[K")
                writer._current_line = ""
                reporter.currentfspath = None
                return
            fill = getattr(reporter, "_write_progress_information_filling_space", None)
            # pytest's own (private) way to end a row, unless the row has its [NN%] already
            if fill is not None and getattr(reporter, "_show_progress_info", False) and \
                    writer.width_of_current_line + 12 < writer.fullwidth:
                fill()
        reporter.ensure_newline()

    def _reopen(self, reporter: Any) -> None:
        """pytest's row of result letters opened again where a line of ours ended it (its
        file's name, as pytest starts a row), so its next letter is not alone on a line."""
        row, self._row = self._row, None
        if row is None or reporter is None or reporter.currentfspath is not None:
            return
        reporter.currentfspath = row
        reporter.write(self._row_name(reporter) + " ")

    @staticmethod
    def _row_name(reporter: Any) -> str:
        """The file name pytest starts a row of results with (relative to where it started)."""
        start = getattr(reporter, "startpath", None) or Path.cwd()
        return os.path.relpath(reporter.currentfspath, start)

    def _raw(self, text: str) -> None:
        self._stdout.write(text)
        self._stdout.flush()

    def _draw(self) -> None:
        """Rewrite the status line (lock held, capturing suspended)."""
        if not self._open:
            self._end_row(self._reporter())  # pytest's "test_sweep.py . [ 12%]" row ends
            self._open = True
        width = shutil.get_terminal_size().columns
        self._raw("\r" + fit_status(list(self._lines.values()), width - 1) + "\x1b[K")
        self._drawn_at = self._clock()

    # -- what the steps call ----------------------------------------------------------------

    def __call__(self, message: str) -> None:
        """One event: a timestamped line in progress.log and on the terminal; an event that
        starts with ``WARNING: `` (a step's warning that needs action, e.g. an SLO probe too
        small to prove its limit) shows with ``-q`` too, as :meth:`warn`."""
        line = self._stamp(message)
        with self._lock:
            self._log(line)
            self._terminal_line(line, always=message.startswith("WARNING: "))

    def warn(self, message: str) -> None:
        """A warning that needs action (``WARNING: …``): as an event line, shown with ``-q``
        too."""
        line = self._stamp(f"WARNING: {message}")
        with self._lock:
            self._log(line)
            self._terminal_line(line, always=True)

    def begin(self, key: str) -> None:
        if self.sweep_clock is not None:
            self.sweep_clock.begin()

    def took(self, key: str, what: str, seconds: float | None) -> None:
        """What the sweep's position and ETA are made of (:mod:`~pytest_ppsweep.measure.eta`)."""
        clock = self.sweep_clock
        if clock is None:
            return
        if what == "boot" and seconds is not None:
            clock.boot_done(key, seconds)
        elif what == "round" and seconds is not None:
            clock.round_done(key, seconds)
        else:  # a failed boot: the layout runs no rounds
            clock.skipped(key)

    def eta_s(self, key: str) -> float | None:
        """Seconds layout ``key`` will take from now (:meth:`SweepClock.layout_s`)."""
        return self.sweep_clock.layout_s(key) if self.sweep_clock is not None else None

    def status(self, key: str, text: str, *, state: str | None = None,
               phase: str | None = None) -> None:
        """The status of ``key`` (a layout) is now ``text``, followed by the sweep's position and
        ETA (``layout 3/5, ETA 12 min``) once :attr:`sweep_clock` is set. ``state`` is what
        counts as a change (``text`` without its clock or bar): a new state is logged with
        ``text``; a ``None`` state is never logged (a bar's redraw)."""
        where = self.sweep_clock.describe(key) if self.sweep_clock is not None else ""
        text = f"{text} | {where}" if where else text
        with self._lock:
            now = self._clock()
            changed = state is not None and self._states.get(key) != state
            beat = state is not None and now - self._logged_at.get(key, now) >= self.heartbeat_s
            self._lines[key] = text
            if changed or beat:
                if state is not None:
                    self._states[key] = state
                self._logged_at[key] = now
                line = self._stamp(text)
                self._log(line)
                if not self.live:
                    self._terminal_line(line)
            if self.live and self._config.get_verbosity() >= -1 and (
                changed or now - self._drawn_at >= self.redraw_s
            ):
                with self._uncaptured():
                    self._draw()

    def end(self, key: str) -> None:
        """``key`` is no longer running: its status goes away (the line, if it was the last)."""
        with self._lock:
            self._lines.pop(key, None)
            self._states.pop(key, None)
            self._logged_at.pop(key, None)
            if not self._open:
                return
            with self._uncaptured():
                if self._lines:
                    self._draw()
                else:
                    self._raw(CLEAR)
                    self._open = False

    def clear_line(self, reopen: bool = False) -> None:
        """Take the status line off the terminal before pytest writes there (a test's
        result); the next status update draws it again below pytest's output. ``reopen``:
        pytest writes a result next, on its row of results opened again."""
        with self._lock:
            if self._open:
                with self._uncaptured():
                    self._raw(CLEAR)
                self._open = False
            if reopen and self.worker is None and self._config.get_verbosity() <= 0:
                with self._uncaptured():
                    self._reopen(self._reporter())

    # -- xdist controller -------------------------------------------------------------------

    def follow_workers(self, poll_s: float = 0.2) -> None:
        """Show the workers' lines of progress.log on this terminal as they are written
        (idempotent; stopped by :meth:`stop_following`)."""
        if self.worker is not None or self._follower is not None:
            return
        follower = LogFollower(self._log_path)
        # What is in the file already was shown here or belongs to no worker yet.
        with contextlib.suppress(OSError):
            follower.new_lines()

        def show() -> None:
            for line in follower.new_lines()[1]:
                if WORKER_LINE.match(line):
                    with self._lock:
                        self._terminal_line(line, always="] WARNING: " in line)

        def loop() -> None:
            while not self._stop.wait(poll_s):  # a poll interval, not a synchronisation
                show()
            show()  # the last lines, before the summary

        self._follower = threading.Thread(target=loop, name="ppsweep-progress", daemon=True)
        self._follower.start()

    def stop_following(self) -> None:
        if self._follower is None:
            return
        self._stop.set()
        self._follower.join(timeout=5)
        self._follower = None


_BAR = re.compile(r" \[[#.]+\] ")


def event_lines(line: str, width: int) -> list[str]:
    """An event line as a terminal of ``width`` columns shows it: wrapped between words (a
    continuation indented under the event's text), never inside a word (``TTFT p50``, a path,
    a layout id stay whole; a word wider than the terminal alone is left to it). Each part of a
    multi-line event is wrapped alone. progress.log keeps the line unwrapped."""
    out: list[str] = []
    for part in line.split("\n"):
        if len(part) <= width:
            out.append(part)
            continue
        indent = " " * min(len(part) - len(part.lstrip(" ")) + 4, max(width // 4, 1))
        if part.startswith("[ppsweep ") and "] " in part:  # under the event, past its stamp
            indent = " " * min(part.index("] ") + 2, max(width // 3, 1))
        out += textwrap.wrap(part, width, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False) or [part]
    return out


def fit_status(parts: list[str], width: int) -> str:
    """The live status line of the running layouts within ``width``: each layout's ``a | b |
    … | where`` text loses its middle parts (the newest milestone, a bar's clock) first, then
    the sweep's position of every layout but the last (it is the same sweep), then a bar's
    drawing (not its count), before a first part (which layout, what phase) is shortened with
    ``…``; the sweep's position and ETA (the last part) stay whole as long as they fit at all.
    The full text is in progress.log."""
    head = "[ppsweep] "
    pieces = [p.split(" | ") for p in parts]

    def text() -> str:
        return head + " | ".join(" | ".join(p) for p in pieces)

    while len(text()) > width:
        longest = max(pieces, key=len)
        if len(longest) > 2:  # a middle part goes first
            del longest[-2]
            continue
        shown_twice = next((p for p in pieces[:-1] if len(p) > 1), None)
        if shown_twice is not None:  # the sweep's position once, after the last layout
            del shown_twice[-1]
            continue
        barred = next((p for p in pieces if _BAR.search(p[0])), None)
        if barred is not None:  # the bar's drawing goes; its count (20/40) stays
            barred[0] = _BAR.sub(" ", barred[0], count=1)
            continue
        first = max(pieces, key=lambda p: len(p[0]))
        over = len(text()) - width
        if len(first[0]) <= 12:
            break  # nothing left to shorten: the line is cut at the width below
        first[0] = first[0][: max(len(first[0]) - over - 1, 11)] + "…"
    out = text()
    return out if len(out) <= width else out[: max(width - 1, 1)] + "…"
