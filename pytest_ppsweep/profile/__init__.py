"""Step 4b, where the time goes: the profile window (SGLang's /start_profile and /stop_profile
around one extra round), the traces collected from every node, and the attribution parser of
torch-profiler Chrome traces (collective calls by kind, cumulative time, p50, exposed
communication, overlap) per rank and per layout; usable standalone (``python -m
pytest_ppsweep.profile TRACE…``).
"""

from __future__ import annotations
