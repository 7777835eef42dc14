"""Write docs/REFERENCE.md from the code: every ``--ppsweep`` option from its definition and
every sweep-file key from the schema, so that the reference cannot drift from what the plugin
accepts (tests/session/test_options_reference.py fails when the file is stale).

    python tools/make_reference.py           # rewrite docs/REFERENCE.md
    python tools/make_reference.py --check   # exit 1 when it is stale

The options come from the plugin's own ``pytest_addoption`` (the parser pytest builds: each
option's names, value, default and help as ``pytest --help`` shows them, plus its ini key). The
sweep-file keys come from the schema's key lists (matrix/schema.py and each table's spec
module), table by table, each with the type, default and meaning matrix/keydocs.py gives it; the
guide of its task says more.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_ppsweep.matrix import keydocs
from pytest_ppsweep.session import options

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "REFERENCE.md"

HEAD = """# Reference

Generated from the code by `python tools/make_reference.py`; do not edit by hand
(tests/session/test_options_reference.py fails when it is stale). The guides say what each
thing is for.
"""


def _parser() -> pytest.Parser:
    parser = pytest.Parser(_ispytest=True)
    options.addoption(parser)
    return parser


def _cell(text: Any) -> str:
    return " ".join(str(text).replace("%%", "%").replace("|", "\\|").split())


def option_lines() -> list[str]:
    """One row per ``--ppsweep`` option: its names and value, its default, its help, and the
    ini key that sets it too (where there is one)."""
    parser = _parser()
    inis = set(parser._inidict)
    rows = ["## Command-line options", "",
            "| option | default | ini key | what it does |", "|---|---|---|---|"]
    group = parser.getgroup("ppsweep")
    for opt in group.options:
        attrs = opt.attrs()
        flag = attrs.get("nargs") == 0  # store_true: no value
        metavar = attrs.get("metavar") or str(attrs.get("dest", "")).removeprefix(
            "ppsweep_").upper()
        value = "" if flag else f" [{metavar}]" if attrs.get("nargs") == "?" else f" {metavar}"
        names = ", ".join(f"`{n}{value}`" for n in opt.names())
        dest = str(attrs.get("dest", ""))
        default = attrs.get("default")
        ini = dest if dest in inis else ""
        if ini and default in (None, [], ""):
            default = parser._inidict[ini][2]
        shown = "—" if default in (None, [], "", False) else f"`{default}`"
        rows.append(f"| {names} | {shown} | {f'`{ini}`' if ini else '—'} | "
                    f"{_cell(attrs.get('help', ''))} |")
    return rows


def _table(table: keydocs.Table) -> list[str]:
    rows = [f"### {table.title}", "", *([table.note, ""] if table.note else []),
            "| key | type | default | meaning |", "|---|---|---|---|"]
    for key in table.keys:
        doc = table.docs[key]
        rows.append(f"| `{key}` | {_cell(doc.type)} | {_cell(keydocs.shown_default(doc))} | "
                    f"{_cell(doc.meaning)} |")
    return [*rows, ""]


def key_lines() -> list[str]:
    """Every key the sweep file takes, table by table: its type, default and meaning
    (matrix/keydocs.py). A key without its KeyDoc is a ValueError naming it."""
    tables = keydocs.tables()
    missing = keydocs.problems(tables)
    if missing:
        raise ValueError("; ".join(missing))
    out = ["## Sweep-file keys", "",
           "Every key each table of `ppsweep.toml` accepts (any other is refused with the file, "
           "the key and the nearest known one): its type, with the bounds the parser checks; "
           "its default when the key is absent; what it does.", ""]
    for table in tables:
        out += _table(table)
    return out


def render() -> str:
    return "\n".join([HEAD, *option_lines(), "", *key_lines()]).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    args = parser.parse_args(argv)
    try:
        text = render()
    except ValueError as exc:
        print(f"{REFERENCE}: a sweep-file key has no line: {exc}", file=sys.stderr)
        return 1
    if args.check:
        stale = not REFERENCE.is_file() or REFERENCE.read_text(encoding="utf-8") != text
        if stale:
            print(f"{REFERENCE}: stale; run python tools/make_reference.py", file=sys.stderr)
        return 1 if stale else 0
    REFERENCE.write_text(text, encoding="utf-8")
    print(REFERENCE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
