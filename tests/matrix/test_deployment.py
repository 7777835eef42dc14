"""A layout is a Deployment of server groups. Today's layouts are one serve group with no router,
and they read exactly as before (ids, boot keys, GPUs, fits, rank commands); a layout of several
groups fits only when each group fills nodes of its own, and one that does not is refused naming
the group and what it lacks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.rankspec import rank_specs
from pytest_ppsweep.matrix.deployment import (
    Deployment,
    DoesNotFit,
    Router,
    ServerGroup,
)
from pytest_ppsweep.matrix.model import (
    Cluster,
    Config,
    NoClusterFits,
    Sweep,
    cluster_for,
    server_key,
)
from pytest_ppsweep.matrix.parse import load

SEED = Path(__file__).resolve().parents[2] / "test_matrix" / "ppsweep.toml"

# The seed's points as the code before the Deployment named and keyed them (a changed digest
# would make every earlier run folder's boots and manifests read as another configuration).
SEED_KEYS = {
    "pp1-tp32-ep4": "pp1-tp32-ep4#605c5141883f",
    "pp2-tp16-ep4": "pp2-tp16-ep4#b0806aa7f721",
    "pp4-tp8-ep4": "pp4-tp8-ep4#b8cd5d861d0a",
    "pp8-tp4-ep4": "pp8-tp4-ep4#460d3964be96",
    "pp16-tp2-ep2": "pp16-tp2-ep2#c149816bfcb6",
}


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    return load(SEED, None)


def _pd(prefill_nodes: tuple[int, ...] | int | None = 2,
        decode_nodes: tuple[int, ...] | int | None = 2, decode_tp: int = 16) -> Config:
    groups = Deployment(
        (ServerGroup("prefill", 2, 8, 8, nodes=prefill_nodes, label="prefill"),
         ServerGroup("decode", 1, decode_tp, 16, nodes=decode_nodes, label="decode",
                     flags={"decode_log_interval": 7})),
        router=Router(port=30100, node=0))
    return Config(2, 8, 8, deployed=groups, tags=("pd",))


def test_a_seed_layout_is_one_serve_group_and_reads_as_before(sweep: Sweep) -> None:
    cluster = sweep.cluster(None)  # 4 nodes × 8 GPUs
    assert {c.id: server_key(c) for c in sweep.configs} == SEED_KEYS
    for config in sweep.configs:
        d = config.deployment
        group = d.serve_group
        assert d.router is None and d.groups == (group,) and d.lead is group
        assert (group.role, group.engine, group.dp, group.label) == ("serve", "sglang", 1, "")
        assert (group.pp, group.tp, group.ep) == (config.pp, config.tp, config.ep)
        assert dict(group.flags) == dict(config.server)
        assert d.columns() == {"pp": config.pp, "tp": config.tp, "ep": config.ep}
        assert config.gpus == config.pp * config.tp == d.gpus
        assert cluster.fits(config) and cluster.placement(config) == ((0, 1, 2, 3),)
        assert cluster.group_parts(config) == [("", cluster)]
        addresses = [h.address for h in cluster.hosts]
        assert d.url(addresses, cluster.port, cluster.placement(config)) == \
            f"http://{addresses[0]}:{cluster.port}"
        specs = rank_specs(sweep, cluster, config)
        assert [(s.node_rank, s.address, s.group) for s in specs] == \
            [(i, a, "") for i, a in enumerate(addresses)]


def test_fits_is_still_pp_times_tp_equals_the_clusters_gpus(sweep: Sweep) -> None:
    big = sweep.clusters["local"]
    for nodes in (1, 2, 3, 4):
        cluster = replace(big, hosts=big.hosts[:nodes])
        for cfg in (Config(1, 32, 4), Config(2, 8, 2), Config(4, 4, 4), Config(3, 3, 1),
                    Config(1, 4, 1), Config(1, 24, 1)):
            assert cluster.fits(cfg) is (cfg.pp * cfg.tp == cluster.gpus), (nodes, cfg.id)
            assert bool(cluster.misfits(cfg)) is not cluster.fits(cfg)


def _four(sweep: Sweep) -> Cluster:
    cluster = sweep.clusters["local"]
    assert (len(cluster.hosts), cluster.gpus_per_node) == (4, 8)
    return cluster


def test_prefill_and_decode_on_two_nodes_each_fit_a_four_node_cluster(sweep: Sweep) -> None:
    cluster = _four(sweep)
    for prefill, decode in ((2, 2), (None, None), ((0, 1), (2, 3)), (2, (0, 1)), ((3, 1), 2)):
        config = _pd(prefill, decode)
        assert cluster.fits(config), cluster.misfits(config)
        placed = cluster.placement(config)
        assert len(set(placed[0]) | set(placed[1])) == 4  # disjoint, every node
        assert cluster_for((cluster,), config) is cluster
    assert cluster.placement(_pd(2, (0, 1))) == ((2, 3), (0, 1))  # explicit nodes first
    config = _pd()
    assert config.gpus == 32
    assert [(label, [h.address for h in part.hosts]) for label, part in
            cluster.group_parts(config)] == [
        ("prefill", [h.address for h in cluster.hosts[:2]]),
        ("decode", [h.address for h in cluster.hosts[2:]])]
    # the benchmark aims at the router
    assert config.deployment.url([h.address for h in cluster.hosts], cluster.port,
                                 cluster.placement(config)) == \
        f"http://{cluster.hosts[0].address}:30100"
    with pytest.raises(ValueError, match="no single serve group"):
        _ = config.deployment.serve_group
    assert config.deployment.columns() == {"pp": 2, "tp": 8, "ep": 8}
    assert server_key(config) != server_key(replace(config, deployed=None))


def test_rank_commands_are_built_per_group(sweep: Sweep) -> None:
    cluster = _four(sweep)
    specs = rank_specs(sweep, cluster, _pd())
    hosts = [h.address for h in cluster.hosts]
    assert [(s.group, s.node_rank, s.address) for s in specs] == [
        ("prefill", 0, hosts[0]), ("prefill", 1, hosts[1]),
        ("decode", 0, hosts[2]), ("decode", 1, hosts[3])]

    def flag(argv: tuple[str, ...], name: str) -> str:
        return argv[argv.index(name) + 1]

    for s in specs:
        head = hosts[0] if s.group == "prefill" else hosts[2]
        assert flag(s.argv, "--nnodes") == "2"
        assert flag(s.argv, "--dist-init-addr") == f"{head}:{cluster.dist_init_port}"
        assert flag(s.argv, "--tp-size") == ("8" if s.group == "prefill" else "16")
        assert ("--decode-log-interval" in s.argv) is (s.group == "decode")


def test_a_deployment_that_does_not_fit_names_the_group_and_what_it_lacks(sweep: Sweep) -> None:
    cluster = _four(sweep)
    # three nodes for prefill leave one for decode, which needs two
    with pytest.raises(DoesNotFit, match=r"decode group pp1-tp16-ep16: needs 2 nodes, 1 of the "
                       r"cluster's 4 left"):
        cluster.placement(_pd(3, 2))
    # a group whose GPUs do not fill its nodes
    problems = cluster.misfits(_pd(2, 1))
    assert problems == ["decode group pp1-tp16-ep16: needs 16 GPUs, its 1 nodes have 8 "
                        "(8 per node)"]
    # explicit nodes that overlap
    problems = cluster.misfits(_pd((0, 1), (1, 2)))
    assert problems == ["decode group pp1-tp16-ep16: nodes [1] are also prefill group "
                        "pp2-tp8-ep8's; groups need disjoint nodes"]
    # a node the cluster does not have
    assert cluster.misfits(_pd((0, 1), (2, 4))) == [
        "decode group pp1-tp16-ep16: nodes [4] are not among the cluster's 4 nodes"]
    # the groups fill only part of the cluster (a smaller decode group)
    assert cluster.misfits(_pd(2, 1, decode_tp=8)) == [
        "the groups take 3 of the cluster's 4 nodes (24 of 32 GPUs)"]
    # the run's choice of cluster names each cluster's reason
    with pytest.raises(NoClusterFits, match=r"p1-pp2tp8ep8-d1-tp16ep16-pd: needs 32 GPUs; no "
                       r"cluster fits: local \(32 GPUs\) \(local: decode group pp1-tp16-ep16: "
                       r"needs 2 nodes"):
        cluster_for((cluster,), _pd(3, 2))
    assert not cluster.fits(_pd(3, 2))


def test_a_deployment_is_checked_when_made() -> None:
    serve = ServerGroup("serve", 1, 8, 8)
    with pytest.raises(ValueError, match="without a router is one serve group; found: "
                       "prefill, decode"):
        Deployment((ServerGroup("prefill", 1, 8, 8, label="p"),
                    ServerGroup("decode", 1, 8, 8, label="d")))
    with pytest.raises(ValueError, match="need distinct labels"):
        Deployment((serve, serve), router=Router(port=1))
    with pytest.raises(ValueError, match="role 'mixed': expected one of serve, prefill, decode"):
        ServerGroup("mixed", 1, 8, 8)
    with pytest.raises(ValueError, match="tp must be ≥ 1, found 0"):
        ServerGroup("serve", 1, 0, 1)
    with pytest.raises(ValueError, match="at least one server group"):
        Deployment(())
    assert ServerGroup("serve", 2, 4, 4, dp=2).gpus == 16


def test_a_pd_layouts_id_leaves_out_the_sizes_that_are_one() -> None:
    groups = (ServerGroup("prefill", 4, 4, 4, label="prefill0"),
              ServerGroup("decode", 1, 8, 4, label="decode0"),
              ServerGroup("decode", 1, 8, 4, label="decode1"))
    dep = Deployment(groups, router=Router(port=30080))
    assert dep.disaggregated and dep.layout_id == "p1-pp4tp4ep4-d2-tp8ep4"
    assert dep.ratio == "p1d2"
    assert [ServerGroup("decode", 1, 4, 1, dp=2).compact, ServerGroup("serve", 2, 8, 1).compact] \
        == ["tp4dp2", "pp2tp8"]
    with pytest.raises(ValueError, match="only a P/D layout has a deployment id"):
        _ = Deployment.single(1, 8, 1).layout_id


def test_each_prefill_server_counts_its_bootstrap_port_up_from_the_base() -> None:
    groups = (ServerGroup("prefill", 1, 4, 1, label="prefill0"),
              ServerGroup("prefill", 1, 4, 1, label="prefill1"),
              ServerGroup("decode", 1, 8, 1, label="decode0"))
    dep = Deployment(groups, router=Router(port=30080))
    assert [dep.bootstrap_port(g, 8998) for g in groups[:2]] == [8998, 8999]
    with pytest.raises(ValueError, match="decode0 group pp1-tp8-ep1: only a prefill group"):
        dep.bootstrap_port(groups[2], 8998)
