"""Lazy re-exports for the step packages: ``from pytest_ppsweep.gate import compare`` works, and
importing a package costs nothing until a name is used (pandas, docker and paramiko load only
where a step needs them, as the plugin's start-up on every pytest run requires)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``<package>.<names[name]>`` on first use."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
