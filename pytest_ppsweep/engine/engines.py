"""Which engine a sweep uses: the one place that maps ``[sweep] engine`` to code.

Each engine is one module of this package with one object that is an
:class:`~pytest_ppsweep.engine.base.Engine`, registered in :data:`ENGINES` below: a new engine
is a new module and its line here.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_ppsweep.engine import sglang, vllm
from pytest_ppsweep.engine.base import Engine

# name (``[sweep] engine``) → the engine
ENGINES: Mapping[str, Engine] = {
    sglang.NAME: sglang.ENGINE,
    vllm.NAME: vllm.ENGINE,
}
# The engine of a sweep that names none (and of run folders written before engines had names).
DEFAULT_ENGINE = sglang.NAME


def engine_of(name: str = DEFAULT_ENGINE) -> Engine:
    """The engine called ``name``."""
    engine = ENGINES.get(name)
    if engine is None:
        raise KeyError(f"unknown engine {name!r}; known engines: {', '.join(sorted(ENGINES))}")
    return engine
