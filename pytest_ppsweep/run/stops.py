"""Stop signals that must not be lost.

The session turns SIGTERM, SIGHUP and Ctrl-C into a ``KeyboardInterrupt`` (session/signals.py).
Python runs a signal handler between any two bytecodes, also inside a finalizer (a weakref
callback, a ``__del__``: an HTTP pool closed by the garbage collector), and an exception raised
there is printed as "unraisable" and dropped: the run would go on and end COMPLETE. So every
stop is noted here until pytest has seen its Ctrl-C, and the run raises it again between tests
and before every round.
"""

from __future__ import annotations

__all__ = ["note_stop", "raise_lost_stop", "stop_reached_pytest"]

_unhandled: list[str] = []  # the stop signals whose Ctrl-C has not reached pytest yet


def note_stop(name: str) -> None:
    """A stop signal arrived (its handler raises the Ctrl-C right after)."""
    _unhandled.append(name)


def raise_lost_stop() -> None:
    """Raise again the Ctrl-C of a stop signal whose first one was dropped."""
    if _unhandled:
        raise KeyboardInterrupt(f"signal {_unhandled[-1]} (raised again: the first was dropped "
                                "inside a finalizer)")


def stop_reached_pytest() -> None:
    """The Ctrl-C reached pytest (pytest_keyboard_interrupt), or a new session starts."""
    _unhandled.clear()
