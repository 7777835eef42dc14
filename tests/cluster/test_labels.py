"""The rank labels are spelled once (cluster/labels.py) and are a public contract: these are the
strings ``docker ps --filter label=…`` and a rank's environment show."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from support.paths import SEED

from pytest_ppsweep.cluster import labels, reap
from pytest_ppsweep.cluster.docker_launcher import container_name
from pytest_ppsweep.cluster.hosts import LocalLauncher
from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.cluster.ssh_launcher import remote_dir
from pytest_ppsweep.matrix.parse import load


def test_the_contract_strings() -> None:
    assert labels.rank_labels("run-1", "local", "pp8-tp4-ep4", 3) == {
        "ppsweep.run": "run-1", "ppsweep.cluster": "local", "ppsweep.config": "pp8-tp4-ep4",
        "ppsweep.node_rank": "3"}
    assert labels.LABELS == ("ppsweep.run", "ppsweep.cluster", "ppsweep.config",
                             "ppsweep.node_rank")
    assert (labels.RUN_ENV, labels.CLUSTER_ENV, labels.CONFIG_ENV, labels.NODE_RANK_ENV) == (
        "PPSWEEP_RUN", "PPSWEEP_CLUSTER", "PPSWEEP_CONFIG", "PPSWEEP_NODE_RANK")
    assert labels.labels_env(labels.rank_labels("r", "c", "x", 0)) == {
        "PPSWEEP_RUN": "r", "PPSWEEP_CLUSTER": "c", "PPSWEEP_CONFIG": "x",
        "PPSWEEP_NODE_RANK": "0"}
    assert reap.RUN_LABEL == labels.RUN_LABEL == "ppsweep.run"


def test_the_launchers_name_a_rank_from_its_labels() -> None:
    lab = labels.rank_labels("run-1", "ns", "pp8-tp4-ep4", 2)
    assert container_name(lab) == "ppsweep-run-1-pp8-tp4-ep4-node2"
    assert remote_dir(lab) == "/tmp/ppsweep-ranks/run-1/pp8-tp4-ep4"


def test_a_labelled_local_rank_is_found_by_its_labels(tmp_path: Path) -> None:
    """What a rank is started with (rank_labels) is what the reaper looks for."""
    cluster = replace(load(SEED, None).clusters["local"], name="labels-test")
    run_id = f"labels-{time.time_ns()}"
    host = cluster.hosts[0]
    spec = RankSpec(0, host.name, host.address,
                    (sys.executable, "-c", "import time; time.sleep(60)"), {})
    rank = LocalLauncher().start(spec, tmp_path / "node0.log",
                                 labels.rank_labels(run_id, cluster.name, "pp1-tp1-ep1", 0))
    try:
        deadline = time.monotonic() + 10
        while not reap.find_local(run_id, cluster.name) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reap.find_local(run_id, cluster.name)
        assert not reap.find_local(run_id, "another-cluster")
        found = reap.find(cluster, run_id)
        assert [(f.run, f.cluster, f.config, f.node_rank) for f in found] == [
            (run_id, cluster.name, "pp1-tp1-ep1", "0")]
    finally:
        rank.stop(1.0)
    assert not reap.find_local(run_id)
