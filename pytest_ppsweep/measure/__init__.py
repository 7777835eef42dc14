"""Step 4, measuring a booted layout: workload, load generator (bench), round metrics and the N/N
rule, GPU snapshots and their cache (snapshots), and the run folder the results are written to
as produced (runstore; configs.csv's row: configrow; run.json: runjson).
"""

from __future__ import annotations
