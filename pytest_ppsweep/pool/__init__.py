"""Step 6, several clusters: the lease pool, the makespan plan from earlier runs (balance) and the
xdist scheduler (the only importer of xdist).
"""

from __future__ import annotations
