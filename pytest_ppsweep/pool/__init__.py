"""Step 6, several clusters: the lease pool, the makespan plan from earlier runs (balance) and the
xdist scheduler (the only importer of xdist).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.pool.balance import (
        SEARCH_BUDGET,
        Estimates,
        expected_durations,
        partition,
    )
    from pytest_ppsweep.pool.lease import (
        WORKER_CLUSTER,
        WORKER_PLAN,
        WORKER_RUN_ID,
        Pool,
        fits,
    )
    from pytest_ppsweep.pool.scheduling import (
        PoolScheduling,
    )

_NAMES = {
    "Estimates": "balance",
    "SEARCH_BUDGET": "balance",
    "expected_durations": "balance",
    "partition": "balance",
    "Pool": "lease",
    "WORKER_CLUSTER": "lease",
    "WORKER_PLAN": "lease",
    "WORKER_RUN_ID": "lease",
    "fits": "lease",
    "PoolScheduling": "scheduling",
}
__all__ = [
    "SEARCH_BUDGET",
    "WORKER_CLUSTER",
    "WORKER_PLAN",
    "WORKER_RUN_ID",
    "Estimates",
    "Pool",
    "PoolScheduling",
    "expected_durations",
    "fits",
    "partition",
]
__getattr__ = lazy(__name__, _NAMES)
