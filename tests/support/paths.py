"""Where things are: the repository, the seed sweep, the acceptance tests, the captured data."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "test_matrix" / "ppsweep.toml"
ACCEPTANCE = REPO / "test_matrix" / "test_sweep.py"
SCRIPTS = REPO / "scripts"
# Real captured artifacts (nvidia-smi on an H200, SGLang 0.5.23 server info and logs).
DATA = REPO / "tests" / "data"


def sweep_folder(folder: Path, toml_text: str) -> Path:
    """A user's sweep folder: ``ppsweep.toml`` with ``toml_text`` beside the shipped acceptance
    tests (``test_sweep.py``), created; returns ``folder``."""
    folder.mkdir(parents=True)
    (folder / "ppsweep.toml").write_text(toml_text)
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    return folder
