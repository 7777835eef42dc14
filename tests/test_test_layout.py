"""Any subset of the test folders collects in one pytest call: no helper found only through one
folder's sys.path entry, no clash of same-named modules or conftests (collection only: quick);
and the tests mirror the source: a unit test of ``pytest_ppsweep/<pkg>/<module>.py`` is
``tests/<pkg>/test_<module>[_<topic>].py``, end-to-end tests have folders of their own."""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.paths import REPO

TESTS = REPO / "tests"
# Each top folder that holds tests (at any depth: tests/sim holds http/, launch/, model/, rank/).
FOLDERS = sorted({p.relative_to(TESTS).parts[0] for p in TESTS.rglob("test_*.py")}
                 - {p.name for p in TESTS.glob("test_*.py")})
SUBSETS = [
    ("sim", "measure"),
    ("report", "gate"),
    ("e2e", "remote"),
    ("report", "browser", "e2e"),
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


@pytest.fixture(scope="module")
def folders_collected() -> None:
    """Every folder's collection at once, a process per core (the checks below then read theirs
    from the cache; one that failed is run again by its check, which fails with its output)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = [pool.submit(_collect, f"tests/{folder}") for folder in FOLDERS]
        for future in futures:
            with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
                future.result()


def test_every_test_folder_is_listed() -> None:
    assert {"e2e", "gate", "measure", "real", "remote", "report", "run", "session",
            "sim"} <= set(FOLDERS)


@pytest.mark.usefixtures("folders_collected")
@pytest.mark.parametrize("folder", FOLDERS)
def test_folder_alone(folder: str) -> None:
    _collect(f"tests/{folder}")


@pytest.mark.usefixtures("folders_collected")
@pytest.mark.parametrize("subset", SUBSETS, ids="+".join)
def test_folders_together_collect_what_each_collects_alone(subset: tuple[str, ...]) -> None:
    together = _collect(*(f"tests/{f}" for f in subset))
    alone = [node for f in subset for node in _collect(f"tests/{f}")]
    assert sorted(together) == sorted(alone)


@pytest.mark.usefixtures("folders_collected")
def test_support_is_found_through_the_pythonpath_ini() -> None:
    """With ``--import-mode=importlib`` no conftest folder goes on sys.path: ``support`` is found
    only through ``pythonpath = ["tests"]`` in pyproject.toml (two folders whose conftests and
    tests import ``support``: the whole suite collected twice costs CI 15 s for nothing more)."""
    folders = ("tests/e2e", "tests/cluster")
    assert sorted(_collect("--import-mode=importlib", *folders)) == sorted(
        node for folder in folders for node in _collect(folder))


def test_test_files_have_unique_basenames() -> None:
    """The test folders have no __init__.py (pytest's default import mode): two test files of
    one basename in two folders cannot both be collected in one run."""
    seen: dict[str, list[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(TESTS)))
    assert {n: p for n, p in seen.items() if len(p) > 1} == {}


def test_the_whole_suite_collects_in_one_call() -> None:
    assert len(_collect("tests")) > 400


# -- the mirror rule: unit tests live where their module lives ----------------------------------

PACKAGE = REPO / "pytest_ppsweep"
BENCHMARKS = REPO / "benchmarks"
# End-to-end kinds keep folders of their own: their files are named by what they run, not by a
# module.
E2E = ("e2e", "real", "remote", "reliability", "browser")
# Checks of the repository itself, beside the folders.
REPOSITORY_CHECKS = ("test_layering", "test_test_layout", "test_readme_commands",
                     "test_no_history_in_code")


def _mirrors(stem: str, modules: set[str]) -> bool:
    """Whether ``test_<stem>`` names one of ``modules``: ``test_<module>`` or
    ``test_<module>_<topic>``."""
    name = stem.removeprefix("test_")
    return any(name == m or name.startswith(f"{m}_") for m in modules)


def mirror_problems(tests: Path = TESTS, package: Path = PACKAGE,
                    benchmarks: Path = BENCHMARKS) -> list[str]:
    """Every test file outside the end-to-end folders that names no module, each with the file
    it should name: ``tests/<pkg>/test_<module>[_<topic>].py`` tests ``pytest_ppsweep/<pkg>/
    <module>.py``; ``tests/benchmarks/test_<bench>[_<topic>].py`` tests ``benchmarks/<bench>.py``;
    ``tests/test_<module>[_<topic>].py`` a top-level module."""
    problems = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        if rel.parts[0] in E2E or rel.parts[0] in ("support", "data"):
            continue
        if len(rel.parts) == 1 and (path.stem in REPOSITORY_CHECKS
                                    or path.stem.startswith("test_layering_")):
            continue
        if rel.parts[0] == "benchmarks":
            home, where = benchmarks, "benchmarks"
        else:
            home, where = package.joinpath(*rel.parts[:-1]), "/".join(
                ["pytest_ppsweep", *rel.parts[:-1]])
        modules = {p.stem for p in home.glob("*.py") if p.stem != "__init__"}
        if not _mirrors(path.stem, modules):
            problems.append(
                f"tests/{rel}: names no module of {where}/ (a unit test of {where}/<module>.py "
                f"lives in tests/{'/'.join(rel.parts[:-1]) or '.'}/test_<module>.py or "
                f"test_<module>_<topic>.py; an end-to-end test in tests/e2e/, real/, remote/, "
                f"reliability/ or browser/); modules there: {', '.join(sorted(modules)) or 'none'}"
            )
    return problems


def test_unit_tests_mirror_the_source() -> None:
    problems = mirror_problems()
    assert not problems, "\n".join(problems)


def test_the_mirror_rule_names_a_stray_test(tmp_path: Path) -> None:
    """The rule can fail: a test named after no module, or in a folder of no package, is named
    with the module it should name; a topic after the module's name and the e2e folders pass."""
    (tmp_path / "pkg" / "results").mkdir(parents=True)
    (tmp_path / "pkg" / "results" / "verdict.py").write_text("")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bench_gate.py").write_text("")
    tests = tmp_path / "tests"
    for name in ("results/test_verdict.py", "results/test_verdict_partial.py",
                 "results/test_verdicts.py", "plugin/test_session.py", "e2e/test_anything.py",
                 "benchmarks/test_bench_gate.py", "benchmarks/test_bench_chaos.py"):
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text("")
    problems = mirror_problems(tests, tmp_path / "pkg", tmp_path / "bench")
    assert [p.split(":")[0] for p in problems] == [
        "tests/benchmarks/test_bench_chaos.py", "tests/plugin/test_session.py",
        "tests/results/test_verdicts.py"]
    assert "names no module of pytest_ppsweep/results/" in problems[2]
    assert "modules there: verdict" in problems[2]
