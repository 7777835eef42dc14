"""Step 5, across runs: per-layout manifests, reuse of identical layouts and resume of an
interrupted run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.continuity.manifest import (
        PER_RUN,
        SCHEMA,
        adopt,
        build,
        differences,
        earlier_baseline,
        finished_rounds,
        load,
        path,
        repair_torn_tail,
        reusable,
        reused_rows,
        write,
    )
    from pytest_ppsweep.continuity.outcomes import (
        finished,
        record,
        start,
    )
    from pytest_ppsweep.continuity.plan import (
        ContinuityError,
        Plan,
        resume,
        reuse,
    )

_NAMES = {
    "PER_RUN": "manifest",
    "SCHEMA": "manifest",
    "adopt": "manifest",
    "build": "manifest",
    "differences": "manifest",
    "earlier_baseline": "manifest",
    "finished_rounds": "manifest",
    "load": "manifest",
    "path": "manifest",
    "repair_torn_tail": "manifest",
    "reusable": "manifest",
    "reused_rows": "manifest",
    "write": "manifest",
    "finished": "outcomes",
    "record": "outcomes",
    "start": "outcomes",
    "ContinuityError": "plan",
    "Plan": "plan",
    "resume": "plan",
    "reuse": "plan",
}
__all__ = [
    "PER_RUN",
    "SCHEMA",
    "ContinuityError",
    "Plan",
    "adopt",
    "build",
    "differences",
    "earlier_baseline",
    "finished",
    "finished_rounds",
    "load",
    "path",
    "record",
    "repair_torn_tail",
    "resume",
    "reusable",
    "reuse",
    "reused_rows",
    "start",
    "write",
]
__getattr__ = lazy(__name__, _NAMES)
