"""A ``[[configs]]`` entry of ``prefill`` and ``decode`` tables is a P/D layout: each role's
servers become server groups (``prefill0``, ``decode0``, ``decode1``…) with the role's shape and
flags, the router comes from ``[configs.router]`` over ``[router]``, and the layout's id is
``p{x}-{shape}-d{y}-{shape}``. Every refusal names the file, the key, what was expected and what
was found. Read from tests/data/pd/pd.toml (1P1D and 1P2D beside a serve group on 4 × 4 GPUs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.matrices import replace_once
from support.paths import DATA

from pytest_ppsweep.matrix.model import MatrixError, Sweep, select, server_key
from pytest_ppsweep.matrix.parse import load

PD = DATA / "pd" / "pd.toml"


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    return load(PD)


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / "pd.toml"
    path.write_text(replace_once(PD.read_text(), old, new))
    return path


def _refused(tmp_path: Path, old: str, new: str) -> str:
    path = _edited(tmp_path, old, new)
    with pytest.raises(MatrixError) as err:
        load(path)
    text = str(err.value)
    assert text.startswith(f"{path}: "), text
    return text


def test_each_role_server_is_a_group_of_the_roles_shape_and_flags(sweep: Sweep) -> None:
    serve, one_one, one_two = sweep.configs
    assert serve.deployed is None and serve.id == "pp2-tp8-ep4"
    dep = one_one.deployment
    assert [(g.label, g.role, g.pp, g.tp, g.ep, g.dp, g.nodes) for g in dep.groups] == [
        ("prefill0", "prefill", 2, 4, 4, 1, None), ("decode0", "decode", 1, 8, 4, 1, 2)]
    assert dict(dep.groups[0].flags) == {"chunked_prefill_size": 16384}
    assert dict(dep.groups[1].flags) == {"max_running_requests": 128}
    assert dep.transfer_backend == "nixl"
    assert [g.label for g in one_two.deployment.groups] == ["prefill0", "decode0", "decode1"]


def test_a_groups_server_arguments_are_the_sweeps_the_layouts_then_its_own(sweep: Sweep) -> None:
    cfg = sweep.configs[1]
    prefill, decode = cfg.deployment.groups
    assert sweep.group_args(cfg, prefill) == {"chunked_prefill_size": 16384}
    assert sweep.group_args(cfg, decode) == {"chunked_prefill_size": 8192,
                                             "max_running_requests": 128}


def test_the_router_takes_the_configs_keys_over_the_sweeps_key_by_key(sweep: Sweep) -> None:
    one_one, one_two = sweep.configs[1].deployment.router, sweep.configs[2].deployment.router
    assert one_one is not None and one_two is not None
    assert (one_one.port, one_one.node, one_one.policy) == (30090, 0, "round_robin")
    assert (one_two.port, one_two.node, one_two.policy) == (30090, 0, "cache_aware")


def test_a_pd_layouts_id_is_its_ratio_and_each_roles_shape(sweep: Sweep) -> None:
    assert [c.id for c in sweep.configs] == [
        "pp2-tp8-ep4", "p1-pp2tp4ep4-d1-tp8ep4", "p1-tp8ep8-d2-tp4ep4"]
    # its pp/tp/ep (what the run folder's columns record) are its lead group's: prefill0's
    cfg = sweep.configs[1]
    assert (cfg.pp, cfg.tp, cfg.ep) == (2, 4, 4)
    assert cfg.deployment.columns() == {"pp": 2, "tp": 4, "ep": 4}
    assert cfg.label == "1 prefill × pp2-tp4-ep4, 1 decode × pp1-tp8-ep4"


def test_a_pd_layout_is_selected_exactly_by_pd_its_counts_or_its_ratio(sweep: Sweep) -> None:
    ids = lambda sel: [c.id for c in select(sweep.configs, sel)]  # noqa: E731
    assert ids("pd") == ["p1-pp2tp4ep4-d1-tp8ep4", "p1-tp8ep8-d2-tp4ep4"]
    assert ids("p1") == ids("pd")
    assert ids("d2") == ids("p1d2") == ["p1-tp8ep8-d2-tp4ep4"]
    assert ids("d1") == ["p1-pp2tp4ep4-d1-tp8ep4"]
    assert ids("pp2") == ["pp2-tp8-ep4"]  # never a substring: pp2 is no P/D layout's name
    assert ids("d") == ids("tp8ep8") == ids("p2") == []


def test_pd_layouts_of_different_shapes_boot_apart(sweep: Sweep, tmp_path: Path) -> None:
    keys = {server_key(c) for c in sweep.configs}
    assert len(keys) == 3
    assert server_key(sweep.configs[1]).startswith("p1-pp2tp4ep4-d1-tp8ep4#")
    # the same ids, a decode server of other flags: another server configuration
    other = load(_edited(tmp_path, "max_running_requests = 128", "max_running_requests = 64"))
    assert other.configs[1].id == sweep.configs[1].id
    assert server_key(other.configs[1]) != server_key(sweep.configs[1])


def test_ep_defaults_by_ep_cap_per_role_and_dp_counts_in_the_id(tmp_path: Path) -> None:
    sweep = load(_edited(tmp_path, "[configs.decode]\ntp = 8\nnodes = 2",
                         "[configs.decode]\ntp = 4\ndp = 2\nnodes = 2"))
    decode = sweep.configs[1].deployment.groups[1]
    assert (decode.tp, decode.ep, decode.dp, decode.gpus) == (4, 4, 2, 8)
    assert sweep.configs[1].id == "p1-pp2tp4ep4-d1-tp4ep4dp2"


def test_an_ep_spanning_a2a_backend_rewrites_each_groups_ep(tmp_path: Path) -> None:
    """The engine's EP = TP rewrite reads each group's own flags: here only prefill's; the
    config keeps the EP its lead group asked for."""
    sweep = load(_edited(tmp_path, "[configs.prefill]\npp = 2\ntp = 4\n[configs.prefill.server]\n",
                         "[configs.prefill]\npp = 2\ntp = 4\nep = 2\n[configs.prefill.server]\n"
                         "moe_a2a_backend = \"deepep\"\n"))
    cfg = sweep.configs[1]
    assert [(g.label, g.tp, g.ep) for g in cfg.deployment.groups] == [("prefill0", 4, 4),
                                                                      ("decode0", 8, 4)]
    assert (cfg.ep, cfg.asked_ep) == (4, 2)


def test_the_cluster_keys_default_and_the_transfer_backends(tmp_path: Path) -> None:
    sweep = load(_edited(tmp_path, 'transfer_backend = "nixl"\n', ""))
    assert sweep.configs[1].deployment.transfer_backend == "mooncake"
    sweep = load(_edited(tmp_path, "bootstrap_port = 9100\n", ""))
    assert sweep.cluster(None).bootstrap_port == 8998


def test_one_role_without_the_other_is_refused(tmp_path: Path) -> None:
    text = _refused(tmp_path, "[configs.decode]\ntp = 8\nnodes = 2\n[configs.decode.server]\n"
                    "max_running_requests = 128\n", "")
    assert "key 'configs[1].decode': a P/D layout has both prefill and decode servers; " \
           "expected a [configs[1].decode] table, found only [configs[1].prefill]" in text


def test_pp_or_tp_beside_the_roles_is_refused(tmp_path: Path) -> None:
    text = _refused(tmp_path, "[[configs]]\n[configs.prefill]\npp = 2",
                    "[[configs]]\ntp = 8\n[configs.prefill]\npp = 2")
    assert "key 'configs[1].tp': expected no tp beside the prefill and decode tables (each " \
           "role gives its own pp, tp, ep), found 8" in text


def test_an_unknown_key_of_a_role_table_is_refused_with_a_hint(tmp_path: Path) -> None:
    text = _refused(tmp_path, "tp = 4\nservers = 2", "tp = 4\nservrs = 2")
    assert "unknown key 'configs[2].decode.servrs' (did you mean 'servers'?); " \
           "expected one of pp, tp, ep, dp, servers, nodes, server" in text


def test_a_router_key_the_engine_does_not_know_is_refused(tmp_path: Path) -> None:
    text = _refused(tmp_path, 'policy = "cache_aware"', 'policy = "least_load"')
    assert "key 'configs[2].router.policy': expected one of 'cache_aware', 'random', " \
           "'round_robin', 'power_of_two', 'manual', found str 'least_load'" in text
    text = _refused(tmp_path, "[router]\nport = 30090", "[router]\nport = 30090\nhost = \"x\"")
    assert "unknown key 'router.host'" in text


def test_a_flag_the_plugin_derives_from_the_role_is_refused(tmp_path: Path) -> None:
    text = _refused(tmp_path, "max_running_requests = 128",
                    "max_running_requests = 128\ndisaggregation_mode = \"prefill\"")
    assert "key 'configs[1].decode.server.disaggregation_mode': set by the plugin from the " \
           "layout and the cluster; remove it" in text


def test_groups_that_do_not_fill_the_cluster_on_their_own_nodes_are_refused(
        tmp_path: Path) -> None:
    text = _refused(tmp_path, "tp = 4\nservers = 2", "tp = 4\nservers = 3")
    assert "key 'configs[2]' (p1-tp8ep8-d3-tp4ep4): expected its server groups (1 prefill × " \
           "pp1-tp8-ep8, 3 decode × pp1-tp4-ep4) to fill a cluster's nodes, each group on " \
           "nodes of its own, found cluster 'local' (4 nodes × 4 GPUs): decode2 group " \
           "pp1-tp4-ep4: needs 1 nodes, 0 of the cluster's 4 left" in text
    text = _refused(tmp_path, "tp = 8\nnodes = 2", "tp = 8\nnodes = 1")
    assert "decode0 group pp1-tp8-ep4: needs 8 GPUs, its 1 nodes have 4 (4 per node)" in text


def test_a_router_port_a_server_binds_is_refused(tmp_path: Path) -> None:
    text = _refused(tmp_path, "[router]\nport = 30090", "[router]\nport = 30000")
    assert "router: port 30000 is also the cluster's port; expected a port of its own" in text
    text = _refused(tmp_path, "bootstrap_port = 9100", "bootstrap_port = 20000")
    assert "prefill0: bootstrap port 20000 (bootstrap_port 20000 + 0) is also the cluster's " \
           "dist_init_port" in text


def test_pd_layouts_are_refused_for_vllm_naming_the_config(tmp_path: Path) -> None:
    text = _refused(tmp_path, 'ep_cap = 4\n', 'ep_cap = 4\nengine = "vllm"\n')
    assert "key 'configs[1]': P/D layouts (prefill and decode servers) are not supported for " \
           "vllm yet; expected a layout of pp and tp with [sweep] engine = 'vllm', found " \
           "prefill and decode tables" in text


def test_a_layout_axis_beside_pd_layouts_is_refused(tmp_path: Path) -> None:
    text = _refused(tmp_path, "[workload]", "[axes]\ntp = [4, 8]\n\n[workload]")
    assert "key 'axes.tp': expected no layout axis (pp, tp, ep) in a sweep with P/D layouts " \
           "(configs[1], p1-pp2tp4ep4-d1-tp8ep4: each role table gives its own sizes), found " \
           "axis tp" in text


def test_a_server_axis_reaches_every_group_unless_a_role_sets_it(tmp_path: Path) -> None:
    sweep = load(_edited(tmp_path, "[workload]", "[axes]\nmem_fraction_static = [0.8, 0.9]\n\n"
                                                 "[workload]"))
    pd = [c for c in sweep.configs if c.deployed is not None]
    assert [c.id for c in pd][:2] == ["p1-pp2tp4ep4-d1-tp8ep4", "p1-pp2tp4ep4-d1-tp8ep4-mem0.9"]
    group = pd[1].deployment.groups[1]
    assert sweep.group_args(pd[1], group)["mem_fraction_static"] == 0.9
    text = _refused(tmp_path, "[workload]", "[axes]\nmax_running_requests = [64, 128]\n\n"
                                            "[workload]")
    assert "key 'configs[1].decode.server.max_running_requests': expected a flag that is not " \
           "also an axis (axes.max_running_requests), found 128" in text


ONE_ONE = """[[configs]]
[configs.prefill]
pp = 2
tp = 4
[configs.prefill.server]
chunked_prefill_size = 16384
[configs.decode]
tp = 8
nodes = 2
[configs.decode.server]
max_running_requests = 128
"""


def test_two_pd_layouts_that_differ_in_one_roles_flags_are_named_by_them(tmp_path: Path) -> None:
    # the 1P1D layout again with its prefill server's chunk halved: the same shapes, so the
    # second is told apart by the role and the flag it sets, and the first by its own value
    other = ONE_ONE.replace("chunked_prefill_size = 16384", "chunked_prefill_size = 8192")
    ids = [c.id for c in load(_edited(tmp_path, ONE_ONE, ONE_ONE + "\n" + other)).configs]
    assert ids == ["pp2-tp8-ep4", "p1-pp2tp4ep4-d1-tp8ep4-prefill_chunk16k",
                   "p1-pp2tp4ep4-d1-tp8ep4-prefill_chunk8k", "p1-tp8ep8-d2-tp4ep4"]


def test_two_pd_layouts_that_do_not_differ_are_refused_as_duplicates(tmp_path: Path) -> None:
    text = _refused(tmp_path, ONE_ONE, ONE_ONE + "\n" + ONE_ONE)
    assert "duplicate configuration p1-pp2tp4ep4-d1-tp8ep4" in text, text
