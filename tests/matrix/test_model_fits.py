""""PP × TP fits this cluster" is written once (Cluster.fits); the matrix check, the sweep's
cluster choice, the pool's scheduler and the continuity plan all ask it, and a layout that fits
no cluster is an error everywhere, never a silent fallback to some other cluster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ppsweep.continuity import takeover as continuity_plan
from pytest_ppsweep.continuity.takeover import ContinuityError
from pytest_ppsweep.matrix.model import (
    Cluster,
    Config,
    MatrixError,
    NoClusterFits,
    Sweep,
    cluster_for,
)
from pytest_ppsweep.matrix.parse import _check_against_pool, load
from pytest_ppsweep.pool.lease import fits
from pytest_ppsweep.run.context import Clusters

SEED = Path(__file__).resolve().parents[2] / "test_matrix" / "ppsweep.toml"


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    return load(SEED, None)


def _sized(cluster: Cluster, nodes: int, name: str) -> Cluster:
    return replace(cluster, name=name, hosts=cluster.hosts[:nodes])


def test_every_user_asks_cluster_fits(sweep: Sweep) -> None:
    big = sweep.clusters["local"]  # 4 nodes × 8 GPUs
    small = _sized(big, 2, "small")  # 2 nodes × 8 GPUs
    layouts = [Config(1, 32, 4), Config(2, 8, 2), Config(4, 4, 4), Config(3, 3, 1)]
    for cfg in layouts:
        assert cfg.gpus == cfg.pp * cfg.tp
        for cluster in (big, small):
            want = cluster.fits(cfg)
            assert want == (cfg.gpus == cluster.gpus)
            with_cfg = replace(sweep, configs=(cfg,))
            assert fits(with_cfg, cfg.id, cluster) is want  # the pool's scheduler
        pool = (small, big)
        fitting = [c for c in pool if c.fits(cfg)]
        if fitting:
            assert cluster_for(pool, cfg) is fitting[0]
            assert Clusters(pool).cluster_for(cfg) is fitting[0]  # the run's (run/context.py)
            assert continuity_plan._cluster_for(pool, cfg) is fitting[0]
            _check_against_pool(replace(sweep, configs=(cfg,)), pool)
        else:
            with pytest.raises(NoClusterFits, match=rf"{cfg.id}: needs 9 GPUs; no cluster "
                               r"fits: small \(16 GPUs\), local \(32 GPUs\)"):
                cluster_for(pool, cfg)
            with pytest.raises(ValueError, match="no cluster fits"):
                Clusters(pool).cluster_for(cfg)
            with pytest.raises(MatrixError, match=r"expected PP × TP = 16 .* or 32 .*= 9"):
                _check_against_pool(replace(sweep, configs=(cfg,)), pool)


def test_the_continuity_plan_refuses_a_layout_no_cluster_fits(sweep: Sweep) -> None:
    """It used to fall back to the first cluster and compare a manifest built for the wrong
    size; now it says why it cannot."""
    small = _sized(sweep.clusters["local"], 2, "small")
    with pytest.raises(ContinuityError, match="pp1-tp32-ep4: needs 32 GPUs; no cluster fits: "
                       r"small \(16 GPUs\); cannot compare its manifest"):
        continuity_plan._cluster_for((small,), sweep.config("pp1-tp32-ep4"))


def test_a_work_unit_that_is_no_layout_fits_anywhere(sweep: Sweep) -> None:
    assert fits(sweep, "not-a-layout", _sized(sweep.clusters["local"], 1, "one"))
