"""Any subset of the test folders collects in one pytest call: no helper found only through one
folder's sys.path entry, no clash of same-named modules or conftests (collection only: quick)."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest
from support.paths import REPO

TESTS = REPO / "tests"
FOLDERS = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py")))
SUBSETS = [
    ("sim", "bench"),
    ("report", "gate"),
    ("plugin", "remote"),
    ("report", "browser", "plugin"),
    ("real", "remote", "sim"),
]
BROKEN = ("ImportError", "ModuleNotFoundError", "ImportPathMismatchError", "import file mismatch",
          "conftest", "errors during collection")


@functools.cache
def _collect(*paths: str) -> tuple[str, ...]:
    """Node ids that ``pytest --collect-only -q <paths>`` prints; fails on any collection error
    (cached: a folder alone is collected once for all the subsets that hold it)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *paths],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"pytest {' '.join(paths)} exited {done.returncode}:\n{out}"
    assert not [w for w in BROKEN if w in out], out
    ids = tuple(line for line in done.stdout.splitlines() if "::" in line)
    assert ids, out
    return ids


def test_every_test_folder_is_listed() -> None:
    assert {"bench", "gate", "plugin", "real", "remote", "report", "sim"} <= set(FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS)
def test_folder_alone(folder: str) -> None:
    _collect(f"tests/{folder}")


@pytest.mark.parametrize("subset", SUBSETS, ids="+".join)
def test_folders_together_collect_what_each_collects_alone(subset: tuple[str, ...]) -> None:
    together = _collect(*(f"tests/{f}" for f in subset))
    alone = [node for f in subset for node in _collect(f"tests/{f}")]
    assert sorted(together) == sorted(alone)


def test_support_is_found_through_the_pythonpath_ini() -> None:
    """With ``--import-mode=importlib`` no conftest folder goes on sys.path: ``support`` is found
    only through ``pythonpath = ["tests"]`` in pyproject.toml."""
    assert len(_collect("--import-mode=importlib", "tests")) == len(_collect("tests"))


def test_test_files_have_unique_basenames() -> None:
    """The test folders have no __init__.py (pytest's default import mode): two test files of
    one basename in two folders cannot both be collected in one run."""
    seen: dict[str, list[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(TESTS)))
    assert {n: p for n, p in seen.items() if len(p) > 1} == {}


def test_the_whole_suite_collects_in_one_call() -> None:
    assert len(_collect("tests")) > 400
