"""The run's allocations as the set-up records and takes them, through each cluster's backend
(session/setup.py never reads a kind's settings): the controller records each allocated
cluster's job in run.json, a worker takes it from there unless the cluster names its own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.backends import backend_of
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.folder.runfolder import RunJson, RunStore
from pytest_ppsweep.matrix.model import Cluster, Host
from pytest_ppsweep.matrix.slurmsettings import with_slurm
from pytest_ppsweep.session.setup import _taking, record_nodes

LOCAL = Cluster(name="box", kind="local", launcher="process", hosts=(Host("127.0.0.1", "n0"),),
                gpus_per_node=1, server_module="pytest_ppsweep.sim", port=30000,
                dist_init_port=20000, nvidia_smi=("nvidia-smi",))
SLURM = replace(LOCAL, name="gpu", kind="slurm", hosts=(Host("slurm-node0", "node0"),))


def test_the_controller_records_each_allocation_and_a_worker_takes_it(tmp_path: Path) -> None:
    store = RunStore(tmp_path, "r-1")
    held = with_slurm(SLURM, jobid="4711")
    record_nodes(store, (LOCAL, held))
    assert RunJson(store).slurm_jobs() == {"gpu": "4711"}
    taken = RunJson(store).slurm_jobs()
    assert backend_of(_taking(SLURM, taken)).allocation() == "4711"
    # a cluster naming its own job keeps it; one whose nodes are the file's is left as it is
    assert backend_of(_taking(with_slurm(SLURM, jobid="9"), taken)).allocation() == "9"
    assert _taking(LOCAL, taken) is LOCAL


def test_only_a_kind_of_allocations_has_one() -> None:
    assert backend_of(LOCAL).allocation() == ""
    with pytest.raises(HostError, match="'box': local \\+ process has no allocation"):
        backend_of(LOCAL).with_allocation("1")
    assert backend_of(SLURM).allocation() == ""
    assert backend_of(backend_of(SLURM).with_allocation("12")).allocation() == "12"
