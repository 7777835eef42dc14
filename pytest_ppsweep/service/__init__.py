"""Step 3, one booted layout: launch (the Service lifecycle), readiness, log scanning and read-only
probes.
"""

from __future__ import annotations
