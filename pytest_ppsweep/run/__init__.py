"""Step 8, one layout's life in a sweep, free of pytest: booted (the ready layout), live (its
status while it boots and runs), rounds (the workload and every repeat of a concurrency),
lifecycle (boot and teardown), profile_step (the profile window), comm_step (the all-reduce
benchmark), slo_search (the highest load within an SLO on one boot), adaptivesweep (the planner's
choices inside a run) and sweeprun (:class:`SweepRun`, the
facade the fixtures and scripts call).
"""

from __future__ import annotations
