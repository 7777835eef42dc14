"""The package's layering, read from its source: no import cycle, and each layer imports only
layers before it (docs/ARCHITECTURE.md draws the same order).

Every import counts: module level, inside functions and under ``TYPE_CHECKING``, since a lazy
import that hides a cycle is still a cycle in the design.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

import pytest_ppsweep

ROOT = Path(pytest_ppsweep.__file__).parent
PACKAGE = "pytest_ppsweep"

# The flow, first to last. A name is a top-level module or a step package; the emulator (sim)
# stands apart: it imports nothing of the plugin and the plugin imports nothing of it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_exports", "redact"),
    # the statistics: pure functions on numbers, imported by the steps, importing none of them
    ("stats",),
    ("engine",),
    ("matrix",),
    ("folder",),
    ("cluster",),
    ("service",),
    ("measure",),
    ("profile",),
    ("comm",),
    ("continuity",),
    ("pool",),
    ("results",),
    ("gate",),
    ("planner",),
    ("report",),
    ("pointchecks",),
    ("run",),
    ("session",),
    ("fixtures",),
    ("plugin",),
    ("__main__",),
    # the import surface of a sweep's test files: it re-exports names of the layers before it
    ("__init__",),
)


def module_name(path: Path, root: Path = ROOT, package: str = PACKAGE) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def imports_of(
    path: Path, known: Iterable[str], root: Path = ROOT, package: str = PACKAGE
) -> set[str]:
    """The modules of ``known`` that ``path`` imports, anywhere in its AST."""
    known = set(known)
    me = module_name(path, root, package)
    here = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    found: set[str] = set()

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            # ``from pkg import mod`` imports the module; ``from pkg import name`` the package
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            hit = resolve(target)
            if hit and hit != me:
                found.add(hit)
    return found


def import_graph(root: Path = ROOT, package: str = PACKAGE,
                 skip: Callable[[str], bool] = lambda _m: False) -> dict[str, set[str]]:
    files = {module_name(p, root, package): p for p in root.rglob("*.py")}
    files = {m: p for m, p in files.items() if not skip(m)}
    return {m: imports_of(p, files, root, package) for m, p in files.items()}


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import cycle (as a closed path of module names), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep):], dep]
            if dep not in state and (cycle := visit(dep)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def layer_of(module: str) -> int:
    rest = module.removeprefix(PACKAGE).lstrip(".")
    head = rest.split(".")[0] if rest else "__init__"
    for i, names in enumerate(LAYERS):
        if head in names:
            return i
    raise AssertionError(f"{module}: not in LAYERS; add its package or module to the flow")


def _plugin_only(module: str) -> bool:
    return module == f"{PACKAGE}.sim" or module.startswith(f"{PACKAGE}.sim.")


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    bad = []
    for mod, deps in sorted(graph.items()):
        for dep in sorted(deps):
            a, b = layer_of(mod), layer_of(dep)
            same_package = mod.split(".")[:2] == dep.split(".")[:2]
            if b > a or (b == a and not same_package and dep != PACKAGE):
                bad.append(f"{mod} (layer {a}) imports {dep} (layer {b})")
    return bad


@pytest.fixture(scope="module")
def plugin_graph() -> dict[str, set[str]]:
    return import_graph(skip=_plugin_only)


def test_no_import_cycle(plugin_graph: dict[str, set[str]]) -> None:
    cycle = find_cycle(plugin_graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_each_layer_imports_only_layers_before_it(plugin_graph: dict[str, set[str]]) -> None:
    assert upward_imports(plugin_graph) == []


def test_every_module_has_a_layer(plugin_graph: dict[str, set[str]]) -> None:
    for module in plugin_graph:
        layer_of(module)


def test_plugin_and_emulator_import_nothing_of_each_other() -> None:
    graph = import_graph()
    crossing = [
        f"{mod} imports {dep}"
        for mod, deps in sorted(graph.items())
        for dep in sorted(deps)
        if _plugin_only(mod) != _plugin_only(dep) and dep != PACKAGE
    ]
    assert crossing == []


def test_the_checker_sees_a_cycle_and_an_upward_import() -> None:
    """The rules above can fail: a planted cycle and a planted upward import are named."""
    graph = {f"{PACKAGE}.matrix.model": {f"{PACKAGE}.cluster.hosts"},
             f"{PACKAGE}.cluster.hosts": {f"{PACKAGE}.matrix.model"}}
    assert find_cycle(graph) == [f"{PACKAGE}.cluster.hosts", f"{PACKAGE}.matrix.model",
                                 f"{PACKAGE}.cluster.hosts"]
    assert upward_imports(graph) == [
        f"{PACKAGE}.matrix.model (layer {layer_of(f'{PACKAGE}.matrix.model')}) imports "
        f"{PACKAGE}.cluster.hosts (layer {layer_of(f'{PACKAGE}.cluster.hosts')})"
    ]


def test_only_the_pool_imports_xdist() -> None:
    importers = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "xdist" or n.startswith("xdist.") for n in names):
                importers.add(module_name(path))
    assert sorted(importers) == [f"{PACKAGE}.pool.scheduling"]


# What every pytest run pays to load the plugin (a sweep is a pytest run; the suite starts a few
# hundred): none of these. A function-local import is kept only where a module-level one would
# load one of them; every other import is at module level (the rule below).
HEAVY = ("pandas", "docker", "fabric", "paramiko", "invoke", "aiohttp", "scipy", "pytest_html",
         "xdist", "torch")


def _module_level_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported: its top level, including ``if``/``try``
    blocks, but not under ``TYPE_CHECKING``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk(node.body)

    walk(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def _function_local_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(fn) if isinstance(node, ast.Import | ast.ImportFrom)]


def _targets(node: ast.Import | ast.ImportFrom, known: set[str], here: str) -> list[str]:
    """The names ``node`` imports: plugin modules (resolved) and top-level third-party names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            up = here.split(".")[: len(here.split(".")) - node.level + 1]
            base = ".".join([*up, *([base] if base else [])])
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = []
    for name in names:
        hit = name
        while hit and hit not in known:
            hit = hit.rpartition(".")[0]
        out.append(hit or name.split(".")[0])
    return out


def heavy_modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, str]:
    """Each plugin module that loads a heavy library when imported → the library (followed
    through the module-level imports of the plugin's own modules)."""
    paths = {module_name(p, root, package): p for p in root.rglob("*.py")
             if not _plugin_only(module_name(p, root, package))}
    known = set(paths)
    deps: dict[str, list[str]] = {}
    for mod, path in paths.items():
        here = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        deps[mod] = [t for n in _module_level_imports(path) for t in _targets(n, known, here)]
        # a submodule's import runs its package's __init__ first
        parts = mod.split(".")
        deps[mod] += [pkg for i in range(2, len(parts)) if (pkg := ".".join(parts[:i])) in known]
    heavy: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for mod, targets in deps.items():
            if mod in heavy:
                continue
            for t in targets:
                lib = t if t in HEAVY else heavy.get(t)
                if lib:
                    heavy[mod] = lib
                    changed = True
                    break
    return heavy


def test_a_function_local_import_is_one_that_would_load_a_heavy_library() -> None:
    """Imports are at module level wherever the layering allows, except where the imported
    module loads pandas, docker, fabric, aiohttp, scipy, pytest-html or torch: those stay inside
    the function that needs them, so that the plugin's start loads none of them (the emulator
    keeps its own lazy imports: its nvidia-smi shim is an interpreter per call)."""
    heavy = heavy_modules()
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        mod = module_name(path)
        if _plugin_only(mod):
            continue
        here = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in _function_local_imports(path):
            targets = _targets(node, set(heavy) | {module_name(p) for p in ROOT.rglob("*.py")},
                               here)
            if not any(t in HEAVY or t in heavy for t in targets):
                bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)}"
                           " loads nothing heavy: import it at module level")
    assert bad == []


def test_the_plugins_start_loads_no_heavy_library() -> None:
    """What the rule above protects, measured: importing the plugin and its fixtures (what
    every pytest run does) loads none of the heavy libraries."""
    code = ("import sys, pytest_ppsweep.plugin, pytest_ppsweep.fixtures; "
            "print(sorted({m.split('.')[0] for m in sys.modules}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    loaded = set(ast.literal_eval(done.stdout.strip()))
    assert sorted(loaded & set(HEAVY)) == []
