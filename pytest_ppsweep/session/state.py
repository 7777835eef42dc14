"""What every concern of the session reads: the fields :class:`SweepSession.__init__
<pytest_ppsweep.session.owner.SweepSession>` sets, declared once for the concern classes mixed
into the owner."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_ppsweep.cluster.registry import Registry
    from pytest_ppsweep.continuity import Plan
    from pytest_ppsweep.matrix.model import Cluster, Sweep
    from pytest_ppsweep.measure.runstore import RunStore
    from pytest_ppsweep.session.progress import Progress

__all__ = ["SessionState"]


class SessionState:
    """The owner's common fields (set by ``SweepSession.__init__``)."""

    config: pytest.Config
    sweep: Sweep
    pool: tuple[Cluster, ...]  # the clusters this process may boot on (a worker: its leased one)
    ids: list[str]
    store: RunStore
    plan: Plan
    progress: Progress
    registry: Registry
    worker: bool
    compare_ref: Path | None
