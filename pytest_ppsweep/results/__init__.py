"""Step 7, from the run folder to a decision: aggregation (medians, deltas), verdicts and the
answers to the questions the points ask.
"""

from __future__ import annotations
