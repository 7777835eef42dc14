"""SGLang-format log lines, flushed one by one (the plugin tails the files).

Format (``configure_logger``): ``[%Y-%m-%d %H:%M:%S{prefix}] message`` where the prefix is
`` PP2 TP5 EP5`` for a scheduler process (a part only when that size > 1) and empty for the
launcher/tokenizer process. Multi-line messages (tracebacks) keep the prefix on the first line
only, as Python's logging does.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import TextIO

from ..model.placement import Layout, LocalScheduler


class SimLog:
    """Writes SGLang-style lines to a stream, flushing after each write."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdout

    def line(self, message: str, prefix: str = "") -> None:
        """One log record (may contain newlines)."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        head = f"[{stamp} {prefix}]" if prefix else f"[{stamp}]"
        self.write(f"{head} {message}\n")

    def lines(self, messages: Iterable[str], prefix: str = "") -> None:
        """Several records with the same prefix."""
        for message in messages:
            self.line(message, prefix)

    def write(self, text: str) -> None:
        """Raw text (uvicorn-style or traceback continuation lines)."""
        try:
            self._stream.write(text)
            self._stream.flush()
        except (BrokenPipeError, ValueError):  # stream closed under us at shutdown
            pass


class SchedulerLog:
    """Per-scheduler logging for the schedulers of one node."""

    def __init__(self, log: SimLog, layout: Layout, schedulers: list[LocalScheduler]) -> None:
        self.log = log
        self.layout = layout
        self.schedulers = schedulers

    def each(self, message: str) -> None:
        """The same message from every local scheduler (one line each, like SGLang)."""
        for sched in self.schedulers:
            self.log.line(message, sched.prefix(self.layout))

    def tp0(self, message: str) -> None:
        """A message only schedulers with tp_rank 0 print (e.g. ``max_total_num_tokens=``)."""
        for sched in self.schedulers:
            if sched.tp_rank == 0:
                self.log.line(message, sched.prefix(self.layout))

    def first(self, message: str) -> None:
        """A message from the node's first scheduler only."""
        if self.schedulers:
            self.log.line(message, self.schedulers[0].prefix(self.layout))

    def prefix_of_first(self) -> str:
        """The prefix of the node's first scheduler."""
        return self.schedulers[0].prefix(self.layout) if self.schedulers else ""
