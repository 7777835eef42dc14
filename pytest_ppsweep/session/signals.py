"""The run's signal handlers: SIGTERM and SIGHUP end the run like a Ctrl-C while layouts are up
(fixtures tear every rank down); once only the report is left to write, a stop signal waits for
it and ends the process afterwards (a second one stops at once)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from pytest_ppsweep.run.stops import forget_stops, note_dropped_stop

__all__ = ["REPORT_SIGNALS", "STOP_SIGNALS", "Signals", "stopping_as_ctrl_c"]


# SIGTERM (kill, a CI timeout) and SIGHUP (the terminal closed, the SSH session dropped) end the
# run like a Ctrl-C: fixtures tear every rank down and the session stops what is left.
STOP_SIGNALS = tuple(
    sig for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if sig is not None
)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn the signal into pytest's Ctrl-C path so fixtures tear every rank down.
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def stopping_as_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP become a Ctrl-C inside the block (before the session's own handlers
    exist: while a Slurm allocation is asked for), the handlers of before put back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _on_sigterm) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# Once every layout is torn down only the report is left to write: a Ctrl-C, SIGTERM or SIGHUP
# then waits until it is written (a second one stops at once), and ends the process after
# pytest_unconfigure with that same signal, so the caller still sees an interrupted run.
REPORT_SIGNALS = (signal.SIGINT, *STOP_SIGNALS)


class Signals:
    """The session's handlers: installed at start, deferred for the report, put back at close."""

    def __init__(self) -> None:
        self._previous_handlers: dict[int, Any] = {}
        self._report_handlers: dict[int, Any] = {}  # while the report is written (finish)
        self._deferred: int | None = None  # a stop signal received while the report is written
        self._previous_unraisable: Any = None  # sys.unraisablehook before watch_dropped

    def install(self) -> None:
        """SIGTERM and SIGHUP become a Ctrl-C (fixtures tear down)."""
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous_handlers[sig] = signal.signal(sig, _on_sigterm)

    def watch_dropped(self) -> None:
        """Once pytest's own hooks are in place (measuring starts): a Ctrl-C that Python drops
        inside a finalizer is noted (run/stops.py) for the run to raise again, then passed on
        to the hook of before (pytest's, which reports it as a warning)."""
        if self._previous_unraisable is None:
            forget_stops()
            self._previous_unraisable = sys.unraisablehook
            sys.unraisablehook = self._on_unraisable

    def _on_unraisable(self, unraisable: Any) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            note_dropped_stop(str(unraisable.exc_value or ""))
        if self._previous_unraisable is not None:
            self._previous_unraisable(unraisable)

    def defer(self) -> None:
        """From pytest_sessionfinish on (every rank is stopped): a stop signal lets the report
        be written and ends the process afterwards (:meth:`end_deferred`); a second one stops
        now."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in REPORT_SIGNALS:
            self._report_handlers[sig] = signal.signal(sig, self._on_report_signal)

    def _on_report_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._deferred is not None:
            raise KeyboardInterrupt(f"signal {name} (second, while the report was written)")
        self._deferred = signum
        # os.write: no lock a signal could find held (the progress writer's)
        os.write(2, f"\nppsweep: {name} while the report is written: finishing it, then "
                    f"stopping (send it again to stop now)\n".encode())

    def _restore_report_handlers(self) -> None:
        """Put back the handlers of before the report (the run's own SIGTERM/SIGHUP ones)."""
        for sig, previous in self._report_handlers.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._report_handlers = {}

    def end_deferred(self) -> None:
        """End the process with the signal that waited for the report, if one did."""
        if self._deferred is not None:
            sig, self._deferred = self._deferred, None
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)

    def restore(self) -> None:
        """Put back the report's and the run's SIGTERM/SIGHUP handlers, and the unraisable
        hook."""
        if self._previous_unraisable is not None:
            if sys.unraisablehook == self._on_unraisable:
                sys.unraisablehook = self._previous_unraisable
            self._previous_unraisable = None
        self._restore_report_handlers()  # first: they put back the run's own handlers
        if self._previous_handlers and threading.current_thread() is threading.main_thread():
            for sig, previous in self._previous_handlers.items():
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
            self._previous_handlers = {}
