"""Step 5, across runs: per-layout manifests, reuse of identical layouts and resume of an
interrupted run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.continuity.manifest import earlier_baseline, reusable
    from pytest_ppsweep.continuity.takeover import ContinuityError, Plan, resume, reuse

_NAMES = {
    "earlier_baseline": "manifest",
    "reusable": "manifest",
    "ContinuityError": "takeover",
    "Plan": "takeover",
    "resume": "takeover",
    "reuse": "takeover",
}
__all__ = [
    "ContinuityError",
    "Plan",
    "earlier_baseline",
    "resume",
    "reusable",
    "reuse",
]
__getattr__ = lazy(__name__, _NAMES)
