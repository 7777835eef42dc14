"""A cluster put on new nodes during the run (a Slurm allocation renewed before a layout) gets
the preflight its first nodes got before the layout boots there (session/preboot.Preflight
.renewed): a problem stops the sweep resumable (ClusterStop) with every problem named; nodes
that pass have their facts kept in the run folder. The real renewal on the test Slurm:
tests/e2e/test_slurm_limits.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_ppsweep.cluster import nodeinfo, preflight
from pytest_ppsweep.cluster.base import ClusterStop
from pytest_ppsweep.session.preboot import Preflight


class _Store:
    def __init__(self) -> None:
        self.written: dict[str, Any] = {}

    def write_json(self, name: str, data: Any) -> None:
        self.written[name] = data


def _preflight(said: list[str]) -> tuple[Preflight, _Store]:
    store = _Store()
    ctx = SimpleNamespace(sweep=object(), registry=None, store=store)
    # the progress is what a Preflight says with: here, the list of what it said
    return Preflight(None, ctx, None, None, None, said.append), store  # type: ignore[arg-type]


def _cluster() -> Any:
    return SimpleNamespace(name="slurm", hosts=[SimpleNamespace(name=f"s70{i}") for i in (3, 4)])


def test_new_nodes_with_a_problem_stop_the_sweep_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    flight, store = _preflight(said)
    monkeypatch.setattr(preflight, "resources", lambda *a: (["s703: 8 CPUs per rank"], []))
    monkeypatch.setattr(preflight, "check", lambda *a: [
        "s704 (10.0.0.4): port 30000 is already in use"])
    with pytest.raises(ClusterStop) as stop:
        flight.renewed(_cluster())
    text = str(stop.value)
    assert "preflight of cluster 'slurm' found 1 problem(s) on 1 of 2 node(s)" in text
    assert "the sweep stops before the next layout boots on them" in text
    assert "s704 (10.0.0.4): port 30000 is already in use" in text
    assert "nothing was started" not in text  # earlier layouts were
    assert store.written == {}  # the old nodes' facts are not replaced by failed ones
    assert any("what each rank gets" in s for s in said), said


def test_new_nodes_that_pass_are_kept_in_the_run_folder(
        monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    flight, store = _preflight(said)
    monkeypatch.setattr(preflight, "resources", lambda *a: ([], []))
    monkeypatch.setattr(preflight, "check", lambda *a: [])
    monkeypatch.setattr(nodeinfo, "metadata", lambda sweep, cluster, registry: {
        "nodes": [h.name for h in cluster.hosts]})
    flight.renewed(_cluster())
    assert list(store.written.values()) == [{"nodes": ["s703", "s704"]}]
    assert said[-1] == "cluster slurm: the new nodes passed the preflight"
