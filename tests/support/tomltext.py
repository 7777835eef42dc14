"""A small TOML writer for generated sweep files (the fuzz builds dicts, then text, then breaks
the text where a dict cannot express the fault: duplicate keys, deep nesting, bad bytes)."""

from __future__ import annotations

import json
import math
from typing import Any


def key(k: str) -> str:
    """Every key quoted: any unicode name is a valid TOML key then."""
    return json.dumps(k, ensure_ascii=False)


def value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        # hex has no digit limit (int → decimal str is capped at 4,300 digits)
        return ("-" if v < 0 else "") + hex(abs(v)) if abs(v) > 10**18 else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML for {type(v).__name__}")


def dumps(doc: dict[str, Any]) -> str:
    """Top-level scalars first, then tables (``[a]``, ``[a.b]``) and arrays of tables."""
    lines: list[str] = []
    _table(doc, [], lines)
    return "\n".join(lines) + "\n"


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _table(tab: dict[str, Any], path: list[str], lines: list[str]) -> None:
    for k, v in tab.items():
        if not isinstance(v, dict) and not _is_table_array(v):
            lines.append(f"{key(k)} = {value(v)}")
    for k, v in tab.items():
        name = ".".join(key(p) for p in [*path, k])
        if isinstance(v, dict):
            lines.append(f"\n[{name}]")
            _table(v, [*path, k], lines)
        elif _is_table_array(v):
            for item in v:
                lines.append(f"\n[[{name}]]")
                _table(item, [*path, k], lines)
