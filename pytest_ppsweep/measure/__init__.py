"""Step 4, measuring a booted layout: workload, load generator (bench), round metrics and the N/N
rule, GPU snapshots and their cache (snapshots), the phases and configs.csv's row of one layout
(configrow), written into the run folder as produced (folder/runfolder.py owns its names).
"""

from __future__ import annotations
