"""The documented commands as a user runs them: in the environment command 1 made, activated
(``source .venv/bin/activate``), from the repository root."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def activated() -> dict[str, str]:
    """The environment after ``source .venv/bin/activate``: the venv's bin folder (this
    interpreter's, with its ``pytest`` and ``python``) first on PATH."""
    venv_bin = Path(sys.executable).parent
    return {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "VIRTUAL_ENV": str(venv_bin.parent)}
