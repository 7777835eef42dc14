"""The package's text says what a thing is and why, never which issue asked for it: the git log
holds the history. A docstring, comment or profile line that cites an issue number fails here,
named file:line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest_ppsweep

ROOT = Path(pytest_ppsweep.__file__).parent
CITATION = re.compile(r"\b[Ii]ssues? #?\d+|\(#\d+\)")


def citations(root: Path) -> list[str]:
    """Every ``issue N`` citation under ``root`` (.py and .toml files), as ``file:line: text``."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".toml") or not path.is_file():
            continue
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{path.relative_to(root)}:{no}: {line.strip()}")
    return found


def test_no_module_cites_an_issue() -> None:
    found = citations(ROOT)
    assert not found, "the code cites issues (the git log holds the history):\n" + "\n".join(found)


def test_a_planted_citation_is_found(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text('"""A thing (issue 37 point 4)."""\n# plain comment\n')
    (tmp_path / "profile.toml").write_text("# see #12 and (#40)\n")
    assert citations(tmp_path) == [
        'mod.py:1: """A thing (issue 37 point 4)."""',
        "profile.toml:1: # see #12 and (#40)",
    ]
