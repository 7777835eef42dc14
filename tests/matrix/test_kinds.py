"""Which (kind, launcher) pairs a sweep file may name comes from the table of kinds
(matrix/kinds.py): Docker on this machine is one; Slurm takes no docker launcher; the keys of one
kind are refused on another. A kind's own keys are its settings type's (Slurm:
matrix/slurmsettings.py), read by its own reader into ``Cluster.settings``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pytest_ppsweep.matrix.kinds import CLUSTER_KEYS, CLUSTER_KINDS
from pytest_ppsweep.matrix.kindsettings import KindSettings
from pytest_ppsweep.matrix.model import Cluster
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.schema import CLUSTER_COMMON_KEYS, MatrixError
from pytest_ppsweep.matrix.slurmsettings import SlurmSettings, with_slurm

SWEEP = """
[sweep]
model_path = "/models/m"
image = "local/sglang:dev"
[[configs]]
pp = 1
tp = 2

[workload]
input_len = 16
output_len = 1
concurrency = [1]
num_requests = 1

[clusters.gpu]
{cluster}hosts = ["10.0.0.1", "10.0.0.2"]
gpus_per_node = 1
"""


def write(tmp_path: Path, cluster: str) -> Path:
    path = tmp_path / "ppsweep.toml"
    path.write_text(SWEEP.format(cluster=cluster))
    return path


def test_docker_on_this_machine_is_a_kind(tmp_path: Path) -> None:
    cluster = load(write(tmp_path, 'kind = "local"\nlauncher = "docker"\n')).clusters["gpu"]
    assert (cluster.kind, cluster.launcher) == ("local", "docker")
    assert [h.address for h in cluster.hosts] == ["10.0.0.1", "10.0.0.2"]


def test_a_launcher_a_kind_does_not_take_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, 'kind = "slurm"\nlauncher = "docker"\n')
    with pytest.raises(MatrixError) as err:
        load(path)
    assert str(err.value) == (
        f"{path}: key 'clusters.gpu.launcher': a slurm cluster starts processes (slurm: steps, "
        "in a container with container_image); expected 'process', found 'docker'")


def test_a_slurm_key_on_a_local_cluster_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, 'kind = "local"\nlauncher = "docker"\npartition = "gpu"\n')
    with pytest.raises(MatrixError) as err:
        load(path)
    assert str(err.value) == (
        f"{path}: key 'clusters.gpu.partition': only a slurm cluster takes it; expected "
        "kind = \"slurm\", found kind = 'local'")


SLURM = 'kind = "slurm"\nnodes = 2\n'
# a value each Slurm key refuses, and the value the parsed settings hold for a good one
BAD = {"jobid": '"12a"', "partition": '"a b"', "account": '"-x"', "time": '"1h"',
       "request_gpus": '"yes"', "salloc_options": '"--x"', "srun_options": "[1]",
       "container_image": "3", "login": '"a b"', "exclusive": "1", "cpus_per_task": "-1",
       "mem": '"5X"', "gres": '"gpu:"', "on_limit": '"renw"', "time_margin_s": "-3",
       "container_cache": '"rel/dir"'}
GOOD = {"jobid": ('"123"', "123"), "partition": ('"gpu"', "gpu"), "account": ('"perf"', "perf"),
        "time": ('"1-02:00:00"', "1-02:00:00"), "request_gpus": ("false", False),
        "salloc_options": ('["--qos=perf"]', ("--qos=perf",)),
        "srun_options": ('["--mpi=none"]', ("--mpi=none",)),
        "container_image": ('"nvcr.io#x/y:1"', "nvcr.io#x/y:1"), "login": ('"login1"', "login1"),
        "exclusive": ("false", False), "cpus_per_task": ("16", 16), "mem": ('"512G"', "512G"),
        "gres": ('"gpu:h200:8"', "gpu:h200:8"), "on_limit": ('"stop"', "stop"),
        "time_margin_s": ("30", 30), "container_cache": ('"/scratch/c"', "/scratch/c")}


def test_the_slurm_keys_are_its_settings_own_and_the_table_says_so() -> None:
    assert set(BAD) == set(GOOD) == set(SlurmSettings.KEYS)
    assert CLUSTER_KINDS["slurm"].own_keys == ("nodes", *SlurmSettings.KEYS)
    assert CLUSTER_KINDS["local"].own_keys == CLUSTER_KINDS["ssh"].own_keys == ()
    assert (*CLUSTER_COMMON_KEYS, "nodes", *SlurmSettings.KEYS) == CLUSTER_KEYS


def test_a_slurm_cluster_reads_every_key_into_its_settings(tmp_path: Path) -> None:
    text = SLURM + "".join(f"{key} = {toml}\n" for key, (toml, _) in GOOD.items())
    cluster = load_cluster(tmp_path, text)
    assert cluster.settings == SlurmSettings(**{k: v for k, (_, v) in GOOD.items()})
    assert load_cluster(tmp_path, SLURM).settings == SlurmSettings()  # every default
    assert [h.address for h in load_cluster(tmp_path, SLURM).hosts] == [
        "slurm-node0", "slurm-node1"]


@pytest.mark.parametrize("key", sorted(BAD))
def test_each_slurm_key_is_checked_by_the_slurm_reader_and_refused_elsewhere(
    tmp_path: Path, key: str
) -> None:
    path = _slurm(tmp_path, SLURM + f"{key} = {BAD[key]}\n")
    with pytest.raises(MatrixError, match=f"^{path}: key 'clusters.gpu.{key}': expected "):
        load(path)
    path = _slurm(tmp_path, f'kind = "ssh"\nhosts = ["a", "b"]\n{key} = {GOOD[key][0]}\n')
    with pytest.raises(MatrixError) as err:
        load(path)
    assert str(err.value) == (
        f"{path}: key 'clusters.gpu.{key}': only a slurm cluster takes it; expected "
        "kind = \"slurm\", found kind = 'ssh'")


def test_a_kind_without_keys_of_its_own_has_no_settings(tmp_path: Path) -> None:
    cluster = load_cluster(tmp_path, 'kind = "ssh"\nhosts = ["a", "b"]\n')
    assert cluster.settings is None
    # its code asking for Slurm settings gets the defaults; another kind's settings are an error
    assert SlurmSettings.of(cluster) == SlurmSettings()

    @dataclass(frozen=True)
    class Other(KindSettings):
        pass

    with pytest.raises(TypeError, match="cluster 'gpu': expected SlurmSettings, found Other"):
        SlurmSettings.of(replace(cluster, settings=Other()))
    assert with_slurm(cluster, jobid="7").settings == SlurmSettings(jobid="7")


def _slurm(tmp_path: Path, cluster: str) -> Path:
    """A sweep file whose cluster table is ``cluster`` and ``gpus_per_node`` (no hosts but its
    own)."""
    path = tmp_path / "ppsweep.toml"
    path.write_text(SWEEP.replace('hosts = ["10.0.0.1", "10.0.0.2"]\n', "\n").format(
        cluster=cluster))
    return path


def load_cluster(tmp_path: Path, cluster: str) -> Cluster:
    return load(_slurm(tmp_path, cluster)).clusters["gpu"]
