"""docs/REFERENCE.md is generated from the code (tools/make_reference.py): every --ppsweep
option from its definition, every sweep-file key from the schema with its type, default and
meaning (matrix/keydocs.py). It fails when stale, or when a key has no line."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest
from support.paths import REPO


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_reference",
                                                  REPO / "tools" / "make_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_reference"] = module
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_what_the_code_says() -> None:
    tool = _tool()
    assert tool.main(["--check"]) == 0, "docs/REFERENCE.md is stale: python tools/make_reference.py"


def test_a_key_or_option_added_without_its_line_makes_it_stale(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_ppsweep.matrix import keydocs, schema
    from pytest_ppsweep.session import options

    tool = _tool()
    monkeypatch.setattr(schema, "SWEEP_KEYS", (*schema.SWEEP_KEYS, "brand_new_key"))
    with pytest.raises(ValueError, match="'brand_new_key' has no KeyDoc"):
        tool.render()
    assert tool.main(["--check"]) == 1
    monkeypatch.setattr(keydocs, "SWEEP_DOCS", {**keydocs.SWEEP_DOCS, "brand_new_key": (
        keydocs.KeyDoc("integer ≥ 1", 7, "a new key."))})
    assert "| `brand_new_key` | integer ≥ 1 | `7` | a new key. |" in tool.render()
    assert tool.main(["--check"]) == 1
    monkeypatch.undo()
    monkeypatch.setattr(options, "OPTIONS", (*options.OPTIONS, (
        "ppsweep_brand_new", "a new option.", None)))
    assert "`--ppsweep-brand-new BRAND_NEW`" in tool.render() and tool.main(["--check"]) == 1
