"""Cluster-level requirements are checked when the sweep file is read, once: a docker cluster
without an image is refused before any node is asked anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.schema import MatrixError

DOCKER_SWEEP = """
[sweep]
model_path = "/models/m"
{image}
[[configs]]
pp = 1
tp = 2

[workload]
input_len = 16
output_len = 1
concurrency = [1]
num_requests = 1

[clusters.gpu]
kind = "ssh"
launcher = "docker"
hosts = ["10.0.0.1", "10.0.0.2"]
gpus_per_node = 1
"""


def test_a_docker_cluster_without_an_image_is_refused_statically(tmp_path: Path) -> None:
    path = tmp_path / "ppsweep.toml"
    path.write_text(DOCKER_SWEEP.format(image=""))
    with pytest.raises(MatrixError) as err:
        load(path)
    assert str(err.value) == (
        f"{path}: key 'sweep.image': expected an image reference (cluster 'gpu' has launcher = "
        f"'docker'; or give --ppsweep-image), found nothing")
    assert load(path, image="local/sglang:dev").image == "local/sglang:dev"
    path.write_text(DOCKER_SWEEP.format(image='image = "local/sglang:dev"'))
    assert load(path).image == "local/sglang:dev"
