"""Planning the pool from expected durations, and the scheduler that follows the plan."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from support.matrices import CONFIGS
from support.paths import SEED

from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.pool.balance import SEARCH_BUDGET, Estimates, expected_durations, partition
from pytest_ppsweep.pool.lease import WORKER_CLUSTER, Pool
from pytest_ppsweep.pool.scheduling import PoolScheduling

# Cluster time per layout of the seeds' sweep as the emulator gives it (emulated seconds).
SEEDS = {"pp1-tp32-ep4": 1700.0, "pp2-tp16-ep4": 1130.0, "pp4-tp8-ep4": 880.0,
         "pp8-tp4-ep4": 870.0, "pp16-tp2-ep2": 1140.0}


def span(plan: dict[str, list[str]], costs: dict[str, float]) -> float:
    return max(sum(costs[u] for u in units) for units in plan.values())


def test_partition_finds_the_balanced_split_greedy_misses() -> None:
    plan = partition(SEEDS, {"gw0": 32, "gw1": 32}, lambda _u, _k: True)
    # Longest first greedy gives {pp1, pp4} | {pp16, pp2, pp8}: 3140 s. The best split is 2880 s.
    assert span(plan, SEEDS) == 2880.0
    assert sorted(map(sorted, plan.values())) == sorted(
        [sorted(["pp1-tp32-ep4", "pp16-tp2-ep2"]),
         sorted(["pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4"])]
    )
    for units in plan.values():  # each worker's list is longest first
        assert [SEEDS[u] for u in units] == sorted((SEEDS[u] for u in units), reverse=True)


def test_partition_respects_what_fits_and_leaves_out_what_fits_nowhere() -> None:
    costs = {"big": 10.0, "small-a": 4.0, "small-b": 4.0, "huge": 1.0}
    needs = {"big": 32, "small-a": 16, "small-b": 16, "huge": 64}
    plan = partition(costs, {"w32": 32, "w16": 16}, lambda u, k: needs[u] == k)
    assert plan == {"w32": ["big"], "w16": ["small-a", "small-b"]}


def test_partition_keeps_the_given_order_for_equal_costs() -> None:
    costs = dict.fromkeys(["pp1", "pp2", "pp4", "pp8"], 1.0)
    plan = partition(costs, {"gw0": 1, "gw1": 1}, lambda _u, _k: True)
    assert plan == {"gw0": ["pp1", "pp4"], "gw1": ["pp2", "pp8"]}


def test_partition_of_a_large_sweep_stops_at_the_budget_with_a_full_plan() -> None:
    costs = {f"u{i:02}": 100.0 + (i * 37) % 91 for i in range(40)}
    plan = partition(costs, {f"w{j}": 1 for j in range(3)}, lambda _u, _k: True)
    assert sorted(u for units in plan.values() for u in units) == sorted(costs)
    assert span(plan, costs) <= sum(costs.values()) / 3 + max(costs.values())
    assert SEARCH_BUDGET > 0


def write_run(root: Path, run_id: str, held: dict[str, tuple[str, str]]) -> None:
    (root / run_id).mkdir(parents=True)
    with (root / run_id / "configs.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["config_id", "boot_ok", "held_s"])
        for cid, (ok, seconds) in held.items():
            w.writerow([cid, ok, seconds])


def test_expected_durations_take_each_layout_from_the_newest_run_that_measured_it(
    tmp_path: Path,
) -> None:
    write_run(tmp_path, "kimi3-pp-20261101-100000", {"pp1": ("True", "50"), "pp2": ("True", "30")})
    write_run(tmp_path, "kimi3-pp-20261102-100000", {"pp1": ("True", "40"), "pp2": ("False", "2")})
    write_run(tmp_path, "other-20261103-100000", {"pp1": ("True", "999")})  # another sweep
    write_run(tmp_path, "kimi3-pp-20261104-100000", {"pp1": ("True", "7")})  # the current run
    (tmp_path / "kimi3-pp-20261105-100000").mkdir()  # an empty folder: no configs.csv
    est = expected_durations(tmp_path, "kimi3-pp", ["pp1", "pp2", "pp4"],
                             exclude="kimi3-pp-20261104-100000")
    # pp2's failed boot in the newer run says nothing about its duration: the older run counts.
    assert est.seconds == {"pp1": 40.0, "pp2": 30.0, "pp4": 35.0}  # pp4: median of the others
    assert est.measured == {"pp1", "pp2"}
    assert est.sources == ("kimi3-pp-20261102-100000", "kimi3-pp-20261101-100000")
    assert "1 layout(s) without history" in est.describe()
    # A layout this run skips (reused, or finished before a resume) costs nothing now.
    est = expected_durations(tmp_path, "kimi3-pp", ["pp1", "pp2"], skipped={"pp1"})
    assert est.seconds == {"pp1": 0.0, "pp2": 30.0}


def test_expected_durations_without_history_weigh_layouts_equally(tmp_path: Path) -> None:
    (tmp_path / "kimi3-pp-20261101-100000").mkdir()
    (tmp_path / "kimi3-pp-20261101-100000" / "configs.csv").write_bytes(b"\xff\xfe garbage")
    est = expected_durations(tmp_path / "missing", "kimi3-pp", ["pp1", "pp2"])
    assert est.seconds == {"pp1": 1.0, "pp2": 1.0} and not est.measured
    assert "weighted equally" in est.describe()
    assert expected_durations(tmp_path, "kimi3-pp", ["pp1"]).seconds == {"pp1": 1.0}


# -- the scheduler, driven as xdist's controller drives it -------------------------------------


class FakeNode:
    """What the scheduler uses of xdist's WorkerController."""

    def __init__(self, wid: str, cluster: str) -> None:
        self.gateway = type("Gateway", (), {"id": wid})()
        self.workerinput = {WORKER_CLUSTER: cluster}
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


class FakeConfig:
    def getvalue(self, name: str) -> Any:
        assert name == "tx"
        return ["2*popen"]


COLLECTION = [f"test_sweep.py::{test}[{cid}{suffix}]" for cid in SEEDS
              for test, suffix in (("test_topology", ""), ("test_prefill", "-c8"),
                                   ("test_prefill", "-c16"))]


@pytest.fixture
def sched() -> tuple[PoolScheduling, FakeNode, FakeNode, list[str]]:
    sweep = load(SEED)
    pool = Pool({n: sweep.clusters[n] for n in ("local", "local-b")})
    notes: list[str] = []
    s = PoolScheduling(FakeConfig(), None, sweep, pool, Estimates(SEEDS, frozenset(SEEDS)),
                       notes.append)
    a, b = FakeNode("gw0", "local"), FakeNode("gw1", "local-b")
    for node in (a, b):
        s.add_node(node)
        s.add_node_collection(node, COLLECTION)
    s.schedule()
    return s, a, b, notes


def layouts(node: FakeNode) -> list[str]:
    seen: list[str] = []
    for i in node.sent:
        cid = COLLECTION[i].split("[")[1].removesuffix("]").removesuffix("-c8")
        cid = cid.removesuffix("-c16")
        if cid not in seen:
            seen.append(cid)
    return seen


def finish(s: PoolScheduling, node: FakeNode, done: set[int]) -> None:
    """The node runs what it has been sent, as an xdist worker does: the last test waits until
    the worker knows the next one or is told to shut down."""
    while True:
        todo = [i for i in node.sent if i not in done]
        runnable = todo if node.shutting_down else todo[:-1]
        if not runnable:
            return
        for i in runnable:
            done.add(i)
            s.mark_test_complete(node, i)


def test_each_worker_starts_with_the_longest_layout_of_its_plan(sched: Any) -> None:
    s, a, b, notes = sched
    assert layouts(a) == ["pp1-tp32-ep4"] and layouts(b) == ["pp2-tp16-ep4"]
    assert any(n.startswith("plan gw0 (local): pp1-tp32-ep4 ~1700 s, pp16-tp2-ep2") for n in notes)
    assert any(n.startswith("plan gw1 (local-b): pp2-tp16-ep4") for n in notes)
    done: set[int] = set()
    finish(s, b, done)  # gw1 runs through its own plan, gw0 is still on pp1
    assert layouts(b)[:3] == ["pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4"]


def test_an_idle_worker_takes_over_a_busy_workers_unstarted_layout(sched: Any) -> None:
    s, a, b, notes = sched
    done: set[int] = set()
    finish(s, b, done)  # the estimates were wrong: gw1 is through while gw0 is on pp1
    assert layouts(b) == ["pp2-tp16-ep4", "pp4-tp8-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2"]
    assert "gw1 takes pp16-tp2-ep2 over from gw0 (idle, not started there)" in notes
    finish(s, a, done)
    assert layouts(a) == ["pp1-tp32-ep4"]  # each layout ran once
    assert s.tests_finished and not s.workqueue


def test_a_crashed_workers_planned_layouts_run_elsewhere_its_started_one_is_not_run(
    sched: Any,
) -> None:
    s, a, b, _notes = sched
    s.remove_node(a)  # gw0 dies during pp1
    assert "pp1-tp32-ep4" in s._pool.not_run
    done: set[int] = set()
    finish(s, b, done)
    assert "pp16-tp2-ep2" in layouts(b) and "pp1-tp32-ep4" not in layouts(b)
    assert not s.workqueue


def test_without_history_the_plan_is_round_robin_and_shows_no_times() -> None:
    sweep = load(SEED)
    notes: list[str] = []
    s = PoolScheduling(FakeConfig(), None, sweep, Pool({n: sweep.clusters[n] for n in
                                                        ("local", "local-b")}), None, notes.append)
    a, b = FakeNode("gw0", "local"), FakeNode("gw1", "local-b")
    for node in (a, b):
        s.add_node(node)
        s.add_node_collection(node, COLLECTION)
    s.schedule()
    assert notes == ["plan gw0 (local): pp1-tp32-ep4, pp4-tp8-ep4, pp16-tp2-ep2",
                     "plan gw1 (local-b): pp2-tp16-ep4, pp8-tp4-ep4"]
    done: set[int] = set()
    finish(s, b, done)  # gw1 is through while gw0 is still on pp1: it takes the rest of
    # gw0's share, the unit gw0 would have started last first
    assert layouts(b) == ["pp2-tp16-ep4", "pp8-tp4-ep4", "pp16-tp2-ep2", "pp4-tp8-ep4"]
    assert layouts(a) == ["pp1-tp32-ep4"]


MIXED = """
[sweep]
name = "mixed"
model_path = "/m"

""" + CONFIGS + """
[[configs]]
pp = 2
tp = 8

[workload]
input_len = 64
output_len = 1
concurrency = [2]
num_requests = 2

[clusters.big]
kind = "local"
hosts = ["127.0.20.1", "127.0.20.2", "127.0.20.3", "127.0.20.4"]
gpus_per_node = 8

[clusters.small]
kind = "local"
hosts = ["127.0.21.1", "127.0.21.2"]
gpus_per_node = 8
"""


def test_layouts_only_a_crashed_workers_cluster_fits_end_as_not_run(tmp_path: Path) -> None:
    (tmp_path / "ppsweep.toml").write_text(MIXED)
    sweep = load(tmp_path / "ppsweep.toml", cluster="big,small")
    ids = [c.id for c in sweep.configs]
    assert ids == ["pp4-tp8-ep1", "pp8-tp4-ep1", "pp2-tp8-ep1"]
    collection = [f"t.py::{test}[{cid}]" for cid in ids for test in ("test_x", "test_y")]
    notes: list[str] = []
    s = PoolScheduling(FakeConfig(), None, sweep, Pool(dict(sweep.clusters)),
                       Estimates(dict.fromkeys(ids, 10.0), frozenset(ids)), notes.append)
    big, small = FakeNode("gw0", "big"), FakeNode("gw1", "small")
    for node in (big, small):
        s.add_node(node)
        s.add_node_collection(node, collection)
    s.schedule()
    # Each worker gets only what its cluster fits.
    assert [collection[i] for i in big.sent] == ["t.py::test_x[pp4-tp8-ep1]",
                                                 "t.py::test_y[pp4-tp8-ep1]"]
    assert [collection[i] for i in small.sent] == ["t.py::test_x[pp2-tp8-ep1]",
                                                   "t.py::test_y[pp2-tp8-ep1]"]
    assert "plan gw1 (small): pp2-tp8-ep1 ~10 s; ~10 s" in notes
    s.remove_node(big)  # the only 32-GPU worker dies during pp4
    assert "pp8-tp4-ep1" in s.workqueue  # kept for a replacement worker while gw1 is busy
    finish(s, small, set())
    # The survivor is through and holds its last test: it is told to stop, the 32-GPU layout
    # it cannot run is reported as not run, and xdist sees the run as finished.
    assert small.shutting_down and not s.workqueue and s.tests_finished
    assert s._pool.not_run["pp8-tp4-ep1"] == (
        "it needs 32 GPUs and no worker with a cluster that size is left in the pool "
        "(2 tests not run)"
    )
    assert "went down before finishing it" in s._pool.not_run["pp4-tp8-ep1"]
