"""Number, delta and row formatting shared by the HTML and terminal summaries (one place, so the
two always show a value the same way).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd  # only a type here: the plugin's start-up never pays pandas' import


def num(value: Any, digits: int = 2, suffix: str = "") -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if math.isnan(number) else f"{number:,.{digits}f}{suffix}"


def delta(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if math.isnan(number) else f"{number:+.2f} %"


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in frame.to_dict("records")]


def fit_table(titles: Sequence[str], rows: Sequence[Sequence[str] | str], width: int,
              align: str = "", indent: str = "", key: int = 1) -> list[str]:
    """A text table whose every line is at most ``width`` wide, nothing cut: the columns side by
    side when they fit; else each row's first ``key`` columns (what the row is) on a line of
    their own and the other columns below it, indented; else, where even those do not fit,
    each value on its own ``title: value`` line. ``align``: one ``<`` or ``>`` per column
    (default: the first ``key`` left, the rest right); a row may hold a last extra cell (a
    verdict) without a title: it follows the row. A row that is a string is a heading between
    rows (wrapped to the width). A text longer than the width is wrapped."""
    n = len(titles)
    align = align or "<" * key + ">" * (n - key)
    cells = [[str(c) for c in r] for r in rows if not isinstance(r, str)]
    widths = [max([len(titles[i]), *(len(r[i]) for r in cells if i < len(r))])
              for i in range(n)]

    def line(values: Sequence[str], cols: range) -> str:
        parts = [f"{values[i]:{align[i]}{widths[i]}}" for i in cols if i < len(values)]
        return "  ".join(parts)

    def tail(values: Sequence[str]) -> str:
        return "  " + "  ".join(values[n:]) if len(values) > n else ""

    def wrapped(text: str, lead: str) -> list[str]:
        return textwrap.wrap(text, width, initial_indent=lead, subsequent_indent=lead + "  ",
                             break_on_hyphens=False, break_long_words=True) or [lead]

    def heading(text: str) -> list[str]:
        return textwrap.wrap(text, width, initial_indent=indent,
                             subsequent_indent=indent + "    ", break_on_hyphens=False)

    flat = [indent + line(titles, range(n))]
    for r in rows:
        flat += heading(r) if isinstance(r, str) else [indent + line(r, range(n)) + tail(r)]
    if all(len(x) <= width for x in flat):
        return [x.rstrip() for x in flat]
    inner = indent + "    "
    below = range(key, n)
    split = [indent + line(titles, range(key)), inner + line(titles, below)]
    for r in rows:
        split += heading(r) if isinstance(r, str) else [
            indent + line(r, range(key)), inner + line(r, below) + tail(r)]
    if all(len(x) <= width for x in split):
        return [x.rstrip() for x in split]
    out: list[str] = []
    for r in rows:
        if isinstance(r, str):
            out += heading(r)
            continue
        row = [str(c) for c in r]
        out += wrapped("  ".join(f"{titles[i].strip()}: {row[i].strip()}"
                                 for i in range(min(key, len(row)))), indent)
        # the other values as "title: value" pairs, a pair never broken across lines
        pairs = [f"{titles[i].strip()}: {row[i].strip()}" for i in below if i < len(row)]
        pairs += [c.strip() for c in row[n:]]
        glued = "  ".join(p.replace(" ", "\x00") for p in pairs)
        out += [x.replace("\x00", " ") for x in textwrap.wrap(
            glued, width, initial_indent=inner, subsequent_indent=inner)]
    return out


def wrap_lines(lines: Sequence[str], width: int) -> list[str]:
    """Plain text lines within ``width``: a longer one wraps, its continuation under its own
    indent plus four spaces; nothing cut, and a value with its unit (``6.63 %``) kept whole."""
    out: list[str] = []
    for text in lines:
        if len(text) <= width:
            out.append(text)
            continue
        lead = text[:len(text) - len(text.lstrip())]
        glued = text.strip().replace(" %", "\x00%")
        out += [x.replace("\x00", " ") for x in textwrap.wrap(
            glued, width, initial_indent=lead, subsequent_indent=lead + "    ",
            break_on_hyphens=False)]
    return out
