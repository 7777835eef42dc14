"""The one format of a benchmark's figures, and the ``--smoke`` switch every benchmark has.

Every ``benchmarks/bench_*.py`` ends its output with one line per figure::

    RESULT <figure name>: <value> | goal <goal text> | ok        (or | not ok)
    RESULT <figure name>: <value> | info                         (a figure without a goal)

printed by :func:`print_results` and read back by :func:`parse_results` (the smoke test in
tests/e2e/test_benchmark_smoke.py, tools/bench_figures.py which rewrites the figures quoted in
docs/guides/running.md and docs/RELIABILITY.md). A figure name holds no ``:``; a value holds no
``|``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from dataclasses import dataclass

LINE = re.compile(r"^RESULT (?P<name>[^:|\n]+): (?P<value>[^|\n]+?) \| "
                  r"(?:goal (?P<goal>[^|\n]+?) \| (?P<verdict>ok|not ok)|(?P<info>info))$")


@dataclass(frozen=True)
class Result:
    """One figure of a benchmark: its value and, when it has one, its goal and whether it met it
    (``ok`` None: a figure printed for information, with no goal)."""

    name: str
    value: str
    goal: str | None = None
    ok: bool | None = None

    def line(self) -> str:
        for text, what in ((self.name, "name"), (self.value, "value"), (self.goal or "", "goal")):
            if "|" in text or "\n" in text or (what == "name" and ":" in text):
                raise ValueError(f"benchmark figure {what} {text!r}: no '|', newline "
                                 "(or ':' in a name) allowed")
        if self.goal is None:
            return f"RESULT {self.name}: {self.value} | info"
        if self.ok is None:
            raise ValueError(f"benchmark figure {self.name!r}: a goal needs ok True/False")
        return f"RESULT {self.name}: {self.value} | goal {self.goal} | " + (
            "ok" if self.ok else "not ok")


def info(name: str, value: str) -> Result:
    """A figure without a goal."""
    return Result(name, value)


def goal(name: str, value: str, goal_text: str, ok: bool) -> Result:
    """A figure with its goal and whether this run met it."""
    return Result(name, value, goal_text, bool(ok))


def print_results(results: Iterable[Result]) -> bool:
    """Print the figures as the benchmark's last lines; True when every goal was met."""
    results = list(results)
    print(flush=True)
    for r in results:
        print(r.line(), flush=True)
    return all(r.ok is not False for r in results)


def finish(results: Iterable[Result], smoke: bool) -> int:
    """Print the figures; the exit status of a benchmark whose goals are figures: 1 when one
    was missed, except in smoke mode, whose figures mean nothing (it fails only by crashing)."""
    met = print_results(results)
    return 0 if met or smoke else 1


def parse_results(text: str) -> list[Result]:
    """The RESULT lines of a benchmark's output, in order."""
    found = []
    for raw in text.splitlines():
        m = LINE.match(raw.rstrip())
        if m:
            ok = None if m["info"] else m["verdict"] == "ok"
            found.append(Result(m["name"], m["value"], m["goal"], ok))
    return found


def add_smoke(ap: argparse.ArgumentParser, what: str) -> None:
    """The ``--smoke`` flag: the same code path at its smallest (``what`` says how small)."""
    ap.add_argument("--smoke", action="store_true",
                    help=f"smoke mode: the same code path with the smallest parameters ({what}); "
                         "its figures mean nothing, only that the benchmark runs")
