"""Every node's energy counters read through the cluster's own node access
(cluster/nodeinfo.read_energy): the emulator's shim on its nodes, NVML's script elsewhere; a
cluster without GPUs says so, and a node without nvidia-ml-py is a named problem, never an error
of the round."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.nodeinfo import energy_command, read_energy
from pytest_ppsweep.cluster.power import NVML_READ_SCRIPT
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Cluster, Host

SHIM = ("{python}", "-m", "pytest_ppsweep.sim.smi", "--host", "{hosts}")


def _emulated(state: Path, hosts: int = 2) -> Cluster:
    return Cluster(
        name="emu", kind="local", launcher="process",
        hosts=tuple(Host(f"127.0.99.{i + 1}", f"n{i}") for i in range(hosts)), gpus_per_node=2,
        server_module="pytest_ppsweep.sim", port=30000, dist_init_port=20000,
        nvidia_smi=SHIM, env={"PPSWEEP_SIM_PROFILE": "tiny", "PPSWEEP_SIM_STATE_DIR": str(state),
                              "PPSWEEP_SIM_TIME_SCALE": "50"},
    )


def test_the_emulators_nodes_answer_through_their_shim(tmp_path: Path) -> None:
    cluster = _emulated(tmp_path)
    assert energy_command(cluster, "127.0.99.1")[-1] == "--nvml-energy"
    with Registry() as registry:
        read = read_energy(cluster, registry)
    assert read.problems == () and not read.no_gpus
    assert sorted(r.gpu for r in read.reads) == ["n0:0", "n0:1", "n1:0", "n1:1"]
    assert read.time_scale == 50.0 and read.step_s == pytest.approx(0.1 / 50)


def test_a_cluster_without_gpus_reads_nothing_and_says_why(tmp_path: Path) -> None:
    with Registry() as registry:
        read = read_energy(replace(_emulated(tmp_path), nvidia_smi=()), registry)
    assert read.no_gpus and read.reads == ()


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None,
                    reason="this interpreter has nvidia-ml-py")
def test_a_node_without_nvidia_ml_py_is_a_named_problem(tmp_path: Path) -> None:
    real = replace(_emulated(tmp_path, hosts=1), server_module="sglang.launch_server",
                   python=sys.executable)
    assert energy_command(real, "127.0.99.1") == [sys.executable, "-c", NVML_READ_SCRIPT]
    with Registry() as registry:
        read = read_energy(real, registry)
    assert read.reads == () and len(read.problems) == 1
    assert read.problems[0].startswith("n0: NVML read failed") and "pynvml" in read.problems[0]
