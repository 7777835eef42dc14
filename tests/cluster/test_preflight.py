"""Preflight of local clusters (loopback "nodes"): the server module is looked for by the
interpreter and in the environment the ranks get."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.matrices import one_node_matrix
from support.paths import REPO

from pytest_ppsweep.cluster import nodeinfo, preflight
from pytest_ppsweep.matrix.parse import load

CPU_MATRIX = REPO / "test_matrix" / "cpu.toml"
CPU_PYTHON = "~/.cache/pytest-ppsweep/venv-sglang-0.5.23/bin/python"  # as cpu.toml ships it


def fake_sglang_venv(home: Path) -> Path:
    """``<home>/.cache/…/bin/python``: this interpreter, finding a stand-in sglang package."""
    site = home / "fake-site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (site / "sglang" / "launch_server.py").write_text("")
    python = home / CPU_PYTHON.removeprefix("~/")
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


def test_shipped_cpu_matrix_expands_home_in_its_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not Path(CPU_PYTHON).expanduser().exists():  # real SGLang not provisioned here
        home = tmp_path / "home"
        fake_sglang_venv(home)
        monkeypatch.setenv("HOME", str(home))
    sweep = load(CPU_MATRIX)
    cluster = sweep.cluster("cpu")
    assert cluster.python == CPU_PYTHON  # the file exactly as shipped: `~` not yet expanded
    assert preflight.check(sweep, cluster) == []
    node = nodeinfo.metadata(sweep, cluster)["nodes"][0]
    assert "error" not in node and node["server_module"] == "sglang.launch_server", node




def test_server_module_is_looked_for_in_the_ranks_environment(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "ppsweep_stub_server.py").write_text("")
    path = tmp_path / "ppsweep.toml"
    path.write_text(one_node_matrix("stub", "ppsweep_stub_server", 39431, 39432, site))
    sweep = load(path)
    assert preflight.check(sweep, sweep.cluster("one")) == []  # the ranks would find it
    assert nodeinfo.metadata(sweep, sweep.cluster("one"))["nodes"][0]["python"]
    # Without that PYTHONPATH the ranks would not find it either, and preflight says so.
    path.write_text(one_node_matrix("stub", "ppsweep_stub_server", 39431, 39432))
    sweep = load(path)
    assert preflight.check(sweep, sweep.cluster("one")) == [
        f"127.0.0.1 (127.0.0.1): server module ppsweep_stub_server is not importable by "
        f"{sys.executable}"
    ]
