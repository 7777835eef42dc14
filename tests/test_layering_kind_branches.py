"""Outside cluster/, no module branches on a cluster's kind or launcher: it asks the cluster's
backend (``cluster.backends.backend_of(cluster).<capability>``). Read from the source with
``ast``; a failure names file:line of every such comparison.

A comparison counts when one side is a ``.kind`` or ``.launcher`` attribute (or a variable of
that name) and
* the other side is a cluster kind or launcher literal ("local", "ssh", "slurm", "docker",
  "process"), alone or in a tuple, list or set; or
* (attributes only) the attribute is ``.launcher`` (only clusters have one), or the object
  whose ``.kind`` it is is named after a cluster (``cluster``, ``self.cluster``, ``clusters[...]``).
Other concepts' kinds (a log finding's, an answer's, an axis's) compared with their own
literals do not count. sim/ (the emulator, with kinds of its own) is not the plugin.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_ppsweep

ROOT = Path(pytest_ppsweep.__file__).parent
EXEMPT = ("cluster", "sim")  # cluster/ maps kinds to code; sim/ is the emulator
CLUSTER_WORDS = frozenset({"local", "ssh", "slurm", "docker", "process"})


def _literals(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {s for elt in node.elts for s in _literals(elt)}
    return set()


def _names_a_cluster(node: ast.expr) -> bool:
    """``cluster``, ``self.cluster``, ``sweep.clusters[name]``, ``the_cluster``…"""
    return "cluster" in ast.unparse(node).lower()


def _kind_attr(node: ast.expr) -> ast.Attribute | ast.Name | None:
    if isinstance(node, ast.Attribute) and node.attr in ("kind", "launcher"):
        return node
    if isinstance(node, ast.Name) and node.id in ("kind", "launcher"):
        return node  # a variable holding one (counts only against a cluster literal)
    return None


def branches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, source) of every comparison on a cluster's kind or launcher in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for i, operand in enumerate(operands):
            attr = _kind_attr(operand)
            if attr is None:
                continue
            others = set().union(*(_literals(o) for j, o in enumerate(operands) if j != i))
            if others & CLUSTER_WORDS or (isinstance(attr, ast.Attribute) and (
                    attr.attr == "launcher" or _names_a_cluster(attr.value))):
                found.append((node.lineno, ast.unparse(node)))
                break
    return sorted(found)


def test_the_checker_finds_a_branch_and_lets_other_kinds_be() -> None:
    src = (
        "if cluster.kind == 'local': pass\n"
        "x = [c for c in pool if c.launcher == 'docker']\n"
        "y = c.kind in ('ssh', 'slurm')\n"
        "z = self.cluster.kind != other\n"
        "ok = finding.kind == 'traceback' or a.kind == 'axis'\n"
        "fine = backend_of(cluster).in_containers\n"
        "if kind in ('local', 'slurm') and launcher != 'process': pass\n"
        "if kind == 'traceback': pass\n"
    )
    assert [line for line, _ in branches(ast.parse(src))] == [1, 2, 3, 4, 7, 7]


def test_no_module_outside_cluster_branches_on_a_cluster_kind() -> None:
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in EXEMPT:
            continue
        for line, text in branches(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            problems.append(f"pytest_ppsweep/{rel}:{line}: {text}")
    assert not problems, (
        "ask the cluster's backend (cluster/backends.backend_of) instead of branching on its "
        "kind or launcher:\n" + "\n".join(problems)
    )


@pytest.mark.parametrize("package", EXEMPT)
def test_the_exempt_packages_exist(package: str) -> None:
    assert (ROOT / package).is_dir()
