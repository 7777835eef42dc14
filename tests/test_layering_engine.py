"""Outside engine/ (and the emulator, sim/), no module names a serving engine's specifics: its
server flags (``--tp-size``, ``chunked_prefill_size`` as a key the engine owns), its endpoints
(``/generate``, ``/flush_cache``, ``/server_info``…), its environment variables (``SGLANG_…``),
its log lines (boot milestones, its own fatal lines) or its name as a word in a string or an
identifier. Read from the source with ``ast``: string constants (docstrings are prose and do not
count; comments are not in the tree) and names; a failure names file:line of each.

What counts as SGLang's comes from the engine module itself (its endpoints, owned flags, knobs,
milestones and fatal lines) and from the emulator's copy of SGLang's parser (every flag). A run
folder's column name (folder/runfolder.py's CONFIG_COLUMNS, RESULT_COLUMNS) is the folder's, not
the engine's. The self-contained scripts comm/ ships to the nodes are not the plugin's modules.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_ppsweep
from pytest_ppsweep.engine import sglang
from pytest_ppsweep.folder.runfolder import CONFIG_COLUMNS, RESULT_COLUMNS
from pytest_ppsweep.sim.launch.serverargs import build_parser

ROOT = Path(pytest_ppsweep.__file__).parent
EXEMPT_DIRS = ("engine", "sim")  # the engine's own module; the emulator of SGLang
# self-contained, never imported: shipped to the nodes and run there with their own CLI
EXEMPT_FILES = ("comm/allreduce_worker.py", "comm/layers_trace.py")
# file → reason, for a specific that cannot move yet (none)
KNOWN: dict[str, str] = {}

ENGINE = sglang.ENGINE
# Flags generic enough that another program's command line has them too (the all-reduce
# worker's, ssh's): a flag check on them would only find those.
GENERIC_FLAGS = frozenset({"--help", "--host", "--port", "--device", "--nnodes", "--node-rank"})
FLAGS = frozenset(o for a in build_parser()._actions for o in a.option_strings
                  if o.startswith("--")) - GENERIC_FLAGS
_FLAG = re.compile("|".join(re.escape(f) for f in sorted(FLAGS, key=len, reverse=True))
                   + r"(?![\w-])")
GENERIC_KEYS = frozenset({"host", "port", "model_path", "nnodes", "node_rank"})
KEYS = (frozenset(ENGINE.owned_flags) | {v for v in vars(ENGINE.knobs).values() if "_" in v}
        | set(ENGINE.axis_short)) - GENERIC_KEYS - set(CONFIG_COLUMNS) - set(RESULT_COLUMNS)
ENDPOINTS = tuple(p for p in (*ENGINE.endpoints.server_info, ENGINE.endpoints.generate,
                              ENGINE.endpoints.completions, ENGINE.endpoints.models,
                              ENGINE.endpoints.flush_cache, ENGINE.endpoints.start_profile,
                              ENGINE.endpoints.stop_profile, ENGINE.endpoints.metrics))
_ENDPOINT = re.compile(r"(?:^|(?<=\s))(" + "|".join(re.escape(p) for p in ENDPOINTS)
                       + r")(?=$|[\s?:'\"])")
_ENV = re.compile(r"\bSGLANG_\w*")
_WORD = re.compile("sglang", re.IGNORECASE)


def _fragments(pattern: str) -> set[str]:
    """The literal runs (8 characters or more) of a regular expression's alternatives."""
    return {piece.strip() for alt in pattern.split("|")
            for piece in re.split(r"\\.|[\[\](){}?*+.^$]", alt) if len(piece.strip()) >= 8}


LOG_LINES = frozenset(ENGINE.milestones) | {
    f for p in ENGINE.fatal_patterns.values() for f in _fragments(p)}


def specifics(text: str) -> list[str]:
    """What of the engine a string constant names (empty: nothing)."""
    found = []
    if _ENV.search(text):
        found.append("environment variable")
    if _WORD.search(text):
        found.append("engine's name")
    if _ENDPOINT.search(text):
        found.append("endpoint")
    if _FLAG.search(text):
        found.append("flag")
    if text in KEYS:
        found.append("flag key")
    if any(line in text for line in LOG_LINES):
        found.append("log line")
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and node.body and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant)):
            out.add(id(node.body[0].value))
    return out


def findings(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, what, text) of every engine specific in ``tree``."""
    prose = _docstrings(tree)
    out: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            out += [(node.lineno, what, node.value[:60]) for what in specifics(node.value)]
        elif isinstance(node, ast.Name) and _WORD.search(node.id):
            out.append((node.lineno, "engine's name", node.id))
        elif isinstance(node, ast.Attribute) and _WORD.search(node.attr):
            out.append((node.lineno, "engine's name", node.attr))
        elif isinstance(node, ast.arg | ast.keyword) and node.arg and _WORD.search(node.arg):
            out.append((node.lineno, "engine's name", node.arg))
    return sorted(out)


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.split("/")[0] in EXEMPT_DIRS or rel in EXEMPT_FILES:
            continue
        yield rel, path


def offending() -> dict[str, list[tuple[int, str, str]]]:
    out = {}
    for rel, path in modules():
        found = findings(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            out[rel] = found
    return out


def test_the_checker_finds_every_kind_of_specific() -> None:
    src = (
        '"""A docstring may say SGLang, /generate and --tp-size as prose."""\n'
        "argv = ['--tp-size', str(tp)]\n"
        "url = f'{base}/flush_cache'\n"
        "env = {'SGLANG_CPU_OMP_THREADS_BIND': '0'}\n"
        "chunk = server.get('chunked_prefill_size')\n"
        "ok = 'The server is fired up and ready to roll!' in line\n"
        "dead = re.compile(r'scheduler is dead')\n"
        "v = meta.sglang_version\n"
        "module = 'sglang.launch_server'\n"
        "fine = ('/health', '--port', 'config_id', 'pp_max_micro_batch_size', 'server_info/x')\n"
        "also_fine = f'{cid}.server_info.json'\n"
    )
    lines = sorted({line for line, _, _ in findings(ast.parse(src))})
    assert lines == [2, 3, 4, 5, 6, 7, 8, 9]


def test_the_checker_sees_a_planted_specific_in_a_module(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('"""A module."""\nURL = "/start_profile"\n', encoding="utf-8")
    assert [(line, what) for line, what, _ in findings(ast.parse(planted.read_text()))] == [
        (2, "endpoint")]


def test_no_module_outside_engine_names_an_engine_specific() -> None:
    found = offending()
    unknown = {rel: hits for rel, hits in found.items() if rel not in KNOWN}
    lines = [f"pytest_ppsweep/{rel}:{line}: {what}: {text!r}"
             for rel, hits in sorted(unknown.items()) for line, what, text in hits]
    assert not lines, ("engine specifics outside engine/ (move them behind the engine, "
                       "engine/engines.engine_of):\n" + "\n".join(lines))


@pytest.mark.parametrize("rel", sorted(KNOWN))
def test_every_known_exception_still_has_its_specific(rel: str) -> None:
    assert rel in offending(), f"{rel} names no engine specific any more: drop it from KNOWN"
