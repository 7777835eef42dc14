"""Labels that identify a run's ranks on every backend, so leftovers can be found and reaped:
docker labels on containers, environment variables (``PPSWEEP_RUN``…) on processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass



def label_env(label: str) -> str:
    """``ppsweep.run`` → ``PPSWEEP_RUN`` (labels of local processes live in their environment)."""
    return label.upper().replace(".", "_")
