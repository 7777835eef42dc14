"""Which (kind, launcher) pairs a sweep file may name comes from the table of kinds
(matrix/kinds.py): Docker on this machine is one; Slurm takes no docker launcher; the keys of one
kind are refused on another."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.schema import MatrixError

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
