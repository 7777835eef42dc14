"""A P/D layout's commands (cluster/rankspec.py): each server group's ranks carry the
sweep's, the layout's and the role's own flags, then the engine's role flags (each prefill
server its own bootstrap port); the router's command aims at each prefill server with its
bootstrap port and at each decode server, from its own node and port. Read from
tests/data/pd/pd.toml."""

from __future__ import annotations

from pathlib import Path

from support.paths import DATA

from pytest_ppsweep.cluster.rankspec import bootstrap_port, rank_specs, router_spec
from pytest_ppsweep.matrix.parse import load

PD = DATA / "pd" / "pd.toml"


def _after(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_each_groups_ranks_carry_its_role_and_rank_within_the_group() -> None:
    sweep = load(PD)
    cluster, cfg = sweep.cluster(None), sweep.configs[2]  # 1P2D: prefill0 on 2 nodes, 2 × decode
    specs = rank_specs(sweep, cluster, cfg)
    assert [(s.group, s.node_rank, s.address) for s in specs] == [
        ("prefill0", 0, "127.0.9.1"), ("prefill0", 1, "127.0.9.2"),
        ("decode0", 0, "127.0.9.3"), ("decode1", 0, "127.0.9.4")]
    prefill, decode1 = specs[1].argv, specs[3].argv
    assert _after(prefill, "--disaggregation-mode") == "prefill"
    assert _after(prefill, "--disaggregation-bootstrap-port") == "9100"
    assert _after(prefill, "--disaggregation-transfer-backend") == "nixl"
    assert _after(prefill, "--dist-init-addr") == "127.0.9.1:20000"
    assert _after(decode1, "--disaggregation-mode") == "decode"
    assert "--disaggregation-bootstrap-port" not in decode1
    # its own rendezvous, on its own head node
    assert _after(decode1, "--dist-init-addr") == "127.0.9.4:20000"
    assert _after(decode1, "--nnodes") == "1" and _after(decode1, "--tp-size") == "4"


def test_the_roles_own_flags_win_over_the_sweeps() -> None:
    sweep = load(PD)
    specs = rank_specs(sweep, sweep.cluster(None), sweep.configs[1])
    assert _after(specs[0].argv, "--chunked-prefill-size") == "16384"  # prefill's own
    assert _after(specs[2].argv, "--chunked-prefill-size") == "8192"  # [server]'s
    assert _after(specs[2].argv, "--max-running-requests") == "128"


def test_each_prefill_server_has_its_own_bootstrap_port(tmp_path: Path) -> None:
    path = tmp_path / "pd.toml"
    path.write_text(PD.read_text().replace("[configs.prefill]\ntp = 8\nep = 8",
                                           "[configs.prefill]\ntp = 4\nservers = 2"))
    sweep = load(path)
    cluster, cfg = sweep.cluster(None), sweep.configs[2]
    assert cfg.id == "p2-tp4ep4-d2-tp4ep4"
    prefill = cfg.deployment.role_groups("prefill")
    assert [bootstrap_port(cluster, cfg, g) for g in prefill] == [9100, 9101]
    assert bootstrap_port(cluster, cfg, cfg.deployment.groups[-1]) == 0  # a decode server's
    router = router_spec(sweep, cluster, cfg)
    assert router is not None
    text = " ".join(router.argv)
    assert ("--prefill http://127.0.9.1:30000 9100 --prefill http://127.0.9.2:30000 9101 "
            "--decode http://127.0.9.3:30000 --decode http://127.0.9.4:30000") in text


def test_the_router_runs_on_its_node_at_its_port_and_a_serve_layout_has_none() -> None:
    sweep = load(PD)
    cluster = sweep.cluster(None)
    assert router_spec(sweep, cluster, sweep.configs[0]) is None
    router = router_spec(sweep, cluster, sweep.configs[1])
    assert router is not None and (router.group, router.address) == ("router", "127.0.9.1")
    assert router.argv[1:4] == ("-m", "sglang_router.launch_router", "--pd-disaggregation")
    assert router.argv[-6:] == ("--host", "127.0.9.1", "--port", "30090", "--policy",
                                "round_robin")
    assert sweep.configs[1].deployment.url([h.address for h in cluster.hosts], cluster.port,
                                           cluster.placement(sweep.configs[1])) \
        == "http://127.0.9.1:30090"
