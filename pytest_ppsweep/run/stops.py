"""Stop signals that must not be lost.

The session turns SIGTERM and SIGHUP into a ``KeyboardInterrupt`` like Python's own Ctrl-C
(session/signals.py). Python runs a signal handler between any two bytecodes, also inside a
finalizer (a weakref callback, a ``__del__``: an HTTP pool closed by the garbage collector), and
an exception raised there is handed to ``sys.unraisablehook`` and dropped: the run would go on
and end COMPLETE. The session's hook notes every dropped ``KeyboardInterrupt`` here, and the run
raises it again before the next test and the next round.
"""

from __future__ import annotations

__all__ = ["forget_stops", "note_dropped_stop", "raise_lost_stop"]

_dropped: list[str] = []  # the Ctrl-Cs dropped inside a finalizer, not raised again yet


def note_dropped_stop(what: str) -> None:
    """A ``KeyboardInterrupt`` (``what``: its message) was dropped inside a finalizer."""
    _dropped.append(what or "Ctrl-C")


def raise_lost_stop() -> None:
    """Raise again the Ctrl-C of a stop signal that was dropped (once)."""
    if _dropped:
        what = _dropped[-1]
        _dropped.clear()
        raise KeyboardInterrupt(f"{what} (raised again: the first was dropped inside a "
                                "finalizer)")


def forget_stops() -> None:
    """A new session: nothing dropped in an earlier one counts."""
    _dropped.clear()
