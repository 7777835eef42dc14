"""Step 1, the sweep file: the frozen model (model), its schema and the parser that validates it
(parse).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ppsweep._exports import lazy

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Sweep
    from pytest_ppsweep.matrix.parse import load
    from pytest_ppsweep.matrix.schema import MatrixError

_NAMES = {
    "Sweep": "model",
    "load": "parse",
    "MatrixError": "schema",
}
__all__ = [
    "MatrixError",
    "Sweep",
    "load",
]
__getattr__ = lazy(__name__, _NAMES)
