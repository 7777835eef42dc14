"""``[[expect]]``: failures a sweep expects, which pytest then reports as ``xfail``.

A sweep that probes what does not fit (seeds §10: PP4/TP8 + DeepEP runs out of memory at boot)
knows some points fail. Each table names the points (``layout``: a glob on the layout id, e.g.
``"pp4-*"``; any axis by name with the value it takes, e.g. ``moe_a2a_backend = "deepep"``),
the kind of failure expected (``failure``: one of :data:`FAILURES`) and why (``reason``,
required). A matching point's tests are marked ``xfail(strict=True)``: the failure expected is
``XFAIL`` with the reason; the point passing is ``XPASS(strict)`` and fails; a failure of
another kind (an NCCL error where an OOM was expected) still fails, naming both
(TensorRT-LLM's perf-sanity waives and ROCm cvs' known failures do the same for their suites).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ppsweep.matrix.schema import MatrixError, Reader

__all__ = ["FAILURES", "Expectation", "expectation_for", "read_expectations"]

# A failure kind and the root-cause kinds of the log scan (service/logscan.py) it covers;
# "boot": any boot failure, whatever its cause.
FAILURES: Mapping[str, tuple[str, ...]] = {
    "oom": ("cuda-oom",),
    "nccl": ("nccl", "rdma", "gloo", "rendezvous"),
    "watchdog": ("watchdog",),
    "engine": ("engine", "exception", "traceback", "killed"),
    "boot": (),
}
EXPECT_KEYS = ("layout", "failure", "reason")


@dataclass(frozen=True)
class Expectation:
    """One ``[[expect]]`` table."""

    failure: str
    reason: str
    layout: str = "*"
    axes: Mapping[str, str] = field(default_factory=dict)
    where: str = "expect[0]"

    def matches(self, layout_id: str, axes: Mapping[str, Any]) -> bool:
        return fnmatch.fnmatchcase(layout_id, self.layout) and all(
            str(axes.get(name)) == value for name, value in self.axes.items())

    def covers(self, cause: str) -> bool:
        """Whether a boot failure whose root cause is of log-scan kind ``cause`` ("" when no
        line said why: a timeout, a rank that exited silently) is the failure expected."""
        kinds = FAILURES[self.failure]
        return not kinds or cause in kinds

    @property
    def text(self) -> str:
        return f"{self.failure} expected ({self.reason})"


def read_expectations(top: Reader, axis_names: Sequence[str]) -> tuple[Expectation, ...]:
    """The ``[[expect]]`` tables, validated against the sweep's axes."""
    found = []
    for i, t in enumerate(top.table_list("expect")):
        t.only((*EXPECT_KEYS, *axis_names))
        axes = {}
        for name in axis_names:
            if name in t.data:
                value = t.data[name]
                if not isinstance(value, str | int | float | bool):
                    raise MatrixError(f"{t.path}: key 'expect[{i}].{name}': expected a value "
                                      f"of the axis, found {type(value).__name__}")
                axes[name] = str(value).lower() if isinstance(value, bool) else str(value)
        found.append(Expectation(
            failure=t.choice("failure", list(FAILURES), required=True),
            reason=t.text("reason", required=True),
            layout=t.text("layout", default="*") or "*",
            axes=axes,
            where=f"expect[{i}]",
        ))
    return tuple(found)


def expectation_for(expect: Sequence[Expectation], layout_id: str,
                    axes: Mapping[str, Any]) -> Expectation | None:
    """The first expectation that covers the point, or None."""
    return next((e for e in expect if e.matches(layout_id, axes)), None)
