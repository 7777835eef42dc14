"""The emulator's import layers: no cycle, nothing from a later layer, nothing of the plugin.

The rule is on the source (the AST of every module under ``pytest_ppsweep/sim``), so an import
inside a function or under ``TYPE_CHECKING`` counts as much as one at the top of a module: a
lazy import cannot hide a cycle. Layers, in order (a module may import its own layer and the
ones before it): the base ``sim/__init__.py``, ``model``, ``launch``, ``http``, ``rank``, then
the entry modules ``__main__`` and ``smi``.

The helpers are small functions over a package folder and its dotted name, so other packages
can reuse them (``import_graph(folder, "pkg")``, ``find_cycles``, ``layer_violations``...).
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
SIM = "pytest_ppsweep.sim"
SIM_DIR = REPO / "pytest_ppsweep" / "sim"
# A layer is a tuple of members: a member names a module, or a package with all of its modules.
SIM_LAYERS: tuple[tuple[str, ...], ...] = (
    (SIM,),  # base: sim/__init__.py only (a member that is exactly the top package)
    (f"{SIM}.model",),
    (f"{SIM}.launch",),
    (f"{SIM}.http",),
    (f"{SIM}.rank",),
    (f"{SIM}.__main__", f"{SIM}.smi", f"{SIM}.comm"),
)
SIM_SUBPACKAGES = ("model", "launch", "http", "rank")

Graph = Mapping[str, Mapping[str, int]]  # importer → {imported module: first line}


class Import(NamedTuple):
    """One imported name, resolved to an absolute dotted name."""

    importer: str
    target: str
    line: int


# ---------------------------------------------------------------------------- reading source
def module_files(pkg_dir: Path, pkg: str) -> dict[str, Path]:
    """Every module of the package folder ``pkg_dir`` (dotted name ``pkg``) → its file."""
    found: dict[str, Path] = {}
    for path in sorted(pkg_dir.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(pkg_dir).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join((pkg, *parts))] = path
    return found


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 >= len(base):
        raise ValueError(f"{module}: relative import beyond the top-level package")
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports_in(module: str, path: Path) -> Iterator[Import]:
    """Every import of ``module`` (at any depth: functions, ``if TYPE_CHECKING:``, ``try:``).

    ``from X import a`` yields ``X.a`` (a submodule or a name in X; :func:`to_module` decides).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = resolve_relative(module, is_package, node.level, node.module)
            for alias in node.names:
                target = base if alias.name == "*" else f"{base}.{alias.name}"
                yield Import(module, target, node.lineno)


def dynamic_imports_in(path: Path) -> Iterator[tuple[int, str]]:
    """Calls of ``importlib.import_module``/``__import__``: imports the AST rule cannot see."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("import_module", "__import__"):
                yield node.lineno, name


def to_module(target: str, modules: Iterable[str]) -> str | None:
    """The module ``target`` loads: itself, else its longest prefix among ``modules``."""
    known = set(modules)
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in known:
            return name
    return None


def all_imports(pkg_dir: Path, pkg: str) -> list[Import]:
    """Every import of every module of the package, absolute."""
    files = module_files(pkg_dir, pkg)
    return [imp for mod, path in files.items() for imp in imports_in(mod, path)]


def import_graph(pkg_dir: Path, pkg: str) -> dict[str, dict[str, int]]:
    """Module → {module of the same package it imports: line of the first such import}.

    The implicit import of a parent package (``a.b.c`` runs ``a/b/__init__.py``) is no edge;
    an explicit one (``from . import name`` that is no submodule) is.
    """
    modules = module_files(pkg_dir, pkg)
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    for imp in all_imports(pkg_dir, pkg):
        target = to_module(imp.target, modules)
        if target is not None and target != imp.importer:
            graph[imp.importer].setdefault(target, imp.line)
    return graph


# ---------------------------------------------------------------------------- the rules
def cyclic_groups(graph: Graph) -> list[list[str]]:
    """The sets of modules that import each other (strongly connected, with a cycle), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    sccs: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graphs are small, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1 or v in graph.get(v, {}):
                sccs.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(sccs)


def find_cycles(graph: Graph) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per set of :func:`cyclic_groups`."""
    return [cycle_through(graph, group) for group in cyclic_groups(graph)]


def cycle_through(graph: Graph, scc: Sequence[str]) -> list[str]:
    """A shortest cycle from ``scc[0]`` back to itself inside the strongly connected ``scc``."""
    start, members = scc[0], set(scc)
    paths: dict[str, list[str]] = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, {})):
                if w == start:
                    return [*paths[v], start]
                if w in members and w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{scc} is not strongly connected")


def layer_of(module: str, layers: Sequence[Sequence[str]]) -> int | None:
    """Index of the layer holding ``module``; the top package is a member only of itself."""
    for i, members in enumerate(layers):
        for member in members:
            if module == member or (i > 0 and module.startswith(member + ".")):
                return i
    return None


def unlayered(graph: Graph, layers: Sequence[Sequence[str]]) -> list[str]:
    """Modules that belong to no layer (a new module must be given one)."""
    return sorted(m for m in graph if layer_of(m, layers) is None)


def layer_violations(graph: Graph, layers: Sequence[Sequence[str]]) -> list[str]:
    """Each import from a later layer into an earlier one, naming both modules."""
    found = []
    for importer, targets in sorted(graph.items()):
        mine = layer_of(importer, layers)
        for target, line in sorted(targets.items()):
            theirs = layer_of(target, layers)
            if mine is not None and theirs is not None and theirs > mine:
                found.append(
                    f"{importer} (layer {mine}: {', '.join(layers[mine])}) imports {target} "
                    f"(later layer {theirs}: {', '.join(layers[theirs])}) at line {line}"
                )
    return found


def outside_imports(imports: Iterable[Import], root: str, allowed: str) -> list[str]:
    """Imports of ``root`` or its modules that are not ``allowed`` or under it."""

    def under(name: str, pkg: str) -> bool:
        return name == pkg or name.startswith(pkg + ".")

    return [
        f"{imp.importer} imports {imp.target} at line {imp.line}"
        for imp in imports
        if under(imp.target, root) and not under(imp.target, allowed)
    ]


# ---------------------------------------------------------------------------- the emulator
@pytest.fixture(scope="module")
def sim_graph() -> dict[str, dict[str, int]]:
    return import_graph(SIM_DIR, SIM)


def test_the_layers_are_the_subpackages(sim_graph: Graph) -> None:
    for sub in SIM_SUBPACKAGES:
        assert f"{SIM}.{sub}" in sim_graph, f"sim/{sub}/__init__.py is missing"
    assert unlayered(sim_graph, SIM_LAYERS) == [], "modules in no layer (add them to one)"


def test_no_import_cycle(sim_graph: Graph) -> None:
    cycles = [
        f"{', '.join(group)}, e.g. {' → '.join(cycle_through(sim_graph, group))}"
        for group in cyclic_groups(sim_graph)
    ]
    assert cycles == [], "modules in an import cycle:\n" + "\n".join(cycles)


def test_no_import_from_a_later_layer(sim_graph: Graph) -> None:
    found = layer_violations(sim_graph, SIM_LAYERS)
    assert found == [], "imports against the layer order:\n" + "\n".join(found)


def test_no_import_of_the_plugin() -> None:
    found = outside_imports(all_imports(SIM_DIR, SIM), "pytest_ppsweep", SIM)
    assert found == [], "the emulator imports the plugin:\n" + "\n".join(found)


def test_no_dynamic_import() -> None:
    found = [
        f"{mod}: {name}() at line {line}"
        for mod, path in module_files(SIM_DIR, SIM).items()
        for line, name in dynamic_imports_in(path)
    ]
    assert found == [], "imports the layer check cannot see:\n" + "\n".join(found)


@pytest.mark.parametrize("sub", SIM_SUBPACKAGES)
def test_layer_package_documents_and_exports(sub: str) -> None:
    pkg = importlib.import_module(f"{SIM}.{sub}")
    assert (pkg.__doc__ or "").strip(), f"sim/{sub}/__init__.py has no docstring"
    names = getattr(pkg, "__all__", None)
    assert names, f"sim/{sub}/__init__.py has no __all__"
    for name in names:
        value = getattr(pkg, name)  # AttributeError: __all__ names something not re-exported
        if (SIM_DIR / sub / f"{name}.py").exists():  # a re-export must not hide a submodule
            assert isinstance(value, types.ModuleType), f"{SIM}.{sub}.{name} shadows a module"


@pytest.mark.parametrize("module", [f"{SIM}.model", f"{SIM}.launch", f"{SIM}.smi"])
def test_light_modules_do_not_import_aiohttp(module: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.startswith('aiohttp')))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )}  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", f"importing {module} imports aiohttp"


# What the nvidia-smi shim must not load for a GPU snapshot: it runs as an interpreter per call
# (every snapshot on the emulator), and these were half of its start (the eager package inits;
# shutil for argparse's terminal width, OpenSSL's hashlib for UUIDs nobody asked for).
SHIM_HEAVY = ("asyncio", f"{SIM}.model.driver", f"{SIM}.model.engine", f"{SIM}.model.scheduler",
              f"{SIM}.model.vbench", f"{SIM}.model.costmodel", f"{SIM}.launch.config", "shutil",
              "_hashlib")  # fmt: skip


def test_the_smi_shim_imports_only_the_modules_it_reads(tmp_path: Path) -> None:
    query = ["--host", "127.0.0.1,127.0.0.2", "--query-gpu=index,name,memory.used,memory.total",
             "--format=csv,noheader,nounits"]  # fmt: skip
    code = (f"import sys, {SIM}.smi as smi; rc = smi.main({query!r}); "
            f"print(rc, sorted(m for m in {SHIM_HEAVY!r} if m in sys.modules), file=sys.stderr)")
    env = {**os.environ, "PPSWEEP_SIM_STATE_DIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )}  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" MiB") == 0 and len(r.stdout.splitlines()) == 2 + 2 * 8, r.stdout
    assert r.stderr.strip() == "0 []", "the nvidia-smi shim imports these (an eager __init__?)"
    # and the lazy re-exports still give the names (test_layer_package_documents_and_exports)
    from pytest_ppsweep.sim import launch, model

    assert model.RealtimeDriver.__module__ == f"{SIM}.model.driver"
    assert launch.SimConfig.__module__ == f"{SIM}.launch.config"
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = model.nothing


# ---------------------------------------------------------------------------- the checker
def _write_package(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_checker_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = _write_package(
        tmp_path / "p",
        {
            "__init__.py": "",
            "low/__init__.py": "from .a import A\n",
            "low/a.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from ..high.b import B
                A = 1
            """,
            "high/__init__.py": "",
            "high/b.py": """
                def f():
                    from ..low import a
                    from .. import outside
                    import x.y
                B = 2
            """,
        },
    )
    graph = import_graph(pkg, "p")
    assert graph["p.low.a"] == {"p.high.b": 4}
    assert graph["p.high.b"] == {"p.low.a": 3, "p": 4}
    assert graph["p.low"] == {"p.low.a": 1}
    assert find_cycles(graph) == [["p.high.b", "p.low.a", "p.high.b"]]
    layers = (("p",), ("p.low",), ("p.high",))
    assert layer_violations(graph, layers) == [
        "p.low.a (layer 1: p.low) imports p.high.b (later layer 2: p.high) at line 4"
    ]
    assert unlayered(graph, (("p",), ("p.low",))) == ["p.high", "p.high.b"]
    assert outside_imports(all_imports(pkg, "p"), "x", "x.z") == ["p.high.b imports x.y at line 5"]


def test_checker_names_every_module_of_a_longer_cycle() -> None:
    graph = {"n": {"b": 1}, "b": {"s": 1}, "s": {"n": 1, "m": 2}, "m": {}, "self": {"self": 3}}
    assert cyclic_groups(graph) == [["b", "n", "s"], ["self"]]
    assert find_cycles(graph) == [["b", "s", "n", "b"], ["self", "self"]]
    assert find_cycles({"a": {"b": 1}, "b": {}}) == []


def test_relative_import_beyond_the_top_fails() -> None:
    assert resolve_relative("p.q.m", False, 2, "r") == "p.r"
    assert resolve_relative("p.q", True, 1, None) == "p.q"
    with pytest.raises(ValueError, match="beyond the top-level package"):
        resolve_relative("p.m", False, 3, None)
