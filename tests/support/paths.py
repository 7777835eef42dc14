"""Where things are: the repository, the seed sweep, the acceptance tests, the captured data."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "test_matrix" / "ppsweep.toml"
ACCEPTANCE = REPO / "test_matrix" / "test_sweep.py"
SCRIPTS = REPO / "scripts"
# Real captured artifacts (nvidia-smi on an H200, SGLang 0.5.23 server info and logs).
DATA = REPO / "tests" / "data"
