"""SGLang as the plugin knows it, read from engine/sglang.py alone: the rank's command line (the
same argv as before the engine had a module), the EP rewrite, the server info read, the topology
check, the native API's stream events, the flag probe, and a P/D server's role flags and
router command (checked against SGLang's own server info and sglang-router's parser)."""

from __future__ import annotations

import argparse
import json

import pytest
from support.paths import DATA

from pytest_ppsweep.engine.argparse_dump import ARGS_SCRIPT
from pytest_ppsweep.engine.engines import DEFAULT_ENGINE, ENGINES, engine_of
from pytest_ppsweep.engine.sglang import ENGINE

ARGV = dict(python="/py", module="sglang.launch_server", model_path="/m", pp=4, tp=8, ep=4,
            nnodes=4, node_rank=1, dist_init="10.0.0.1:20000", host="10.0.0.2", port=30000)


def test_the_registry_holds_sglang_as_the_default() -> None:
    assert DEFAULT_ENGINE == "sglang" and engine_of() is ENGINES["sglang"] is ENGINE
    with pytest.raises(KeyError, match="unknown engine 'tgi'; known engines: sglang, vllm"):
        engine_of("tgi")


def test_the_rank_argv_is_launch_server_s() -> None:
    argv = ENGINE.rank_argv(**ARGV, server={"chunked_prefill_size": 8192,
                                            "disable_radix_cache": True, "enable_metrics": False})
    assert argv == ["/py", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "8",
                    "--pp-size", "4", "--ep-size", "4", "--nnodes", "4", "--node-rank", "1",
                    "--dist-init-addr", "10.0.0.1:20000", "--host", "10.0.0.2", "--port",
                    "30000", "--chunked-prefill-size", "8192", "--disable-radix-cache"]
    assert ENGINE.rank_identity(argv) == ("10.0.0.2", "30000", False)
    assert ENGINE.rendezvous_of(argv) == "10.0.0.1:20000"
    assert ENGINE.flags_argv("/py", "m") == ["/py", "-c", ARGS_SCRIPT, "m"]


def test_an_ep_spanning_a2a_backend_runs_ep_equal_tp() -> None:
    spanning = ENGINE.ep_spanning_a2a
    assert ENGINE.effective_ep(8, 4, {"moe_a2a_backend": "deepep"}, spanning) == 8
    assert ENGINE.effective_ep(8, 4, {"moe_a2a_backend": "none"}, spanning) == 4
    assert ENGINE.effective_ep(8, 4, {}, spanning) == 4
    assert ENGINE.effective_ep(8, 4, {"moe_a2a_backend": "deepep"}, ("mooncake",)) == 4


def test_server_info_reads_as_a_topology_and_is_checked() -> None:
    info = {"pp_size": 4, "tp_size": 8, "ep_size": 4, "dp_size": 1, "nnodes": 4,
            "moe_runner_backend": "auto", "moe_a2a_backend": "none", "version": "0.5.23",
            "internal_states": [{"pp_max_micro_batch_size": 16, "max_running_requests": 64,
                                 "max_total_num_tokens": 500000}]}
    topo = ENGINE.topology(info)
    assert (topo.pp, topo.tp, topo.ep, topo.dp, topo.nnodes) == (4, 8, 4, 1, 4)
    assert (topo.pp_max_micro_batch_size, topo.max_running_requests) == (16, 64)
    assert (topo.max_total_tokens, topo.version, topo.simulated) == (500000, "0.5.23", False)
    want = {"pp": 4, "tp": 8, "ep": 4, "nnodes": 4}
    assert ENGINE.topology_problems("c", want, {}, topo) == []
    assert ENGINE.topology_problems("c", {**want, "ep": 8}, {"moe_a2a_backend": "deepep"},
                                    topo) == [
        "c: server reports ep_size=4, the matrix asks 8",
        "c: server reports moe_a2a_backend='none', the matrix asks 'deepep'"]


def test_a_stream_event_gives_the_record_its_numbers_and_a_bad_one_raises() -> None:
    event = ENGINE.stream_event({"text": "a", "meta_info": {
        "prompt_tokens": 5, "completion_tokens": 2, "e2e_latency": 0.5,
        "finish_reason": {"type": "length", "message": None}}})
    assert event.fields == {"prompt_tokens": 5, "completion_tokens": 2,
                            "server_e2e_latency": 0.5}
    assert event.finish == ("length", None) and event.text
    with pytest.raises(TypeError, match="completion_tokens is str"):
        ENGINE.stream_event({"meta_info": {"completion_tokens": "2"}})


def test_a_dp_server_says_its_replicas_and_a_one_replica_argv_is_unchanged() -> None:
    one = ENGINE.rank_argv(**ARGV, server={})
    assert "--dp-size" not in one
    two = ENGINE.rank_argv(**ARGV, server={}, dp=2)
    assert two[two.index("--ep-size") + 2:two.index("--ep-size") + 4] == ["--dp-size", "2"]


def test_a_pd_servers_role_flags_are_sglangs_own_names() -> None:
    """The names and defaults SGLang 0.5.23 reports in its own server info (a captured
    /server_info, every server argument in it)."""
    info = json.loads((DATA / "sglang" / "n4-pp2tp2.server_info.json").read_text())
    assert (info["disaggregation_mode"], info["disaggregation_bootstrap_port"],
            info["disaggregation_transfer_backend"]) == ("null", 8998, ENGINE.transfer_backends[0])
    prefill = ENGINE.role_flags("prefill", bootstrap_port=9100, transfer_backend="nixl")
    decode = ENGINE.role_flags("decode", bootstrap_port=0, transfer_backend="nixl")
    assert prefill == {"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "nixl",
                       "disaggregation_bootstrap_port": 9100}
    assert decode == {"disaggregation_mode": "decode", "disaggregation_transfer_backend": "nixl"}
    assert set(prefill) <= set(info) and set(prefill) <= ENGINE.owned_flags
    assert ENGINE.role_flags("serve", bootstrap_port=0, transfer_backend="") == {}
    with pytest.raises(ValueError, match="server role 'encode': expected serve, prefill or"):
        ENGINE.role_flags("encode", bootstrap_port=0, transfer_backend="")


ROUTER = dict(python="/py", host="10.0.0.1", port=30080,
              prefill=[("http://10.0.0.1:30000", 8998), ("http://10.0.0.2:30000", 8999)],
              decode=["http://10.0.0.3:30000"], flags={})


def test_the_router_argv_is_sglang_routers_pd_launcher() -> None:
    argv = ENGINE.router_argv(**ROUTER, policy="round_robin")
    assert argv == ["/py", "-m", "sglang_router.launch_router", "--pd-disaggregation",
                    "--prefill", "http://10.0.0.1:30000", "8998",
                    "--prefill", "http://10.0.0.2:30000", "8999",
                    "--decode", "http://10.0.0.3:30000",
                    "--host", "10.0.0.1", "--port", "30080", "--policy", "round_robin"]
    assert ENGINE.router_argv(**ROUTER, policy="")[-2:] == ["--policy", "cache_aware"]


def test_the_router_argv_parses_with_sglang_routers_own_parser() -> None:
    """sglang-router 0.3.2's RouterArgs reads back every server and its bootstrap port (where
    the router is installed)."""
    router_args = pytest.importorskip("sglang_router.router_args")
    parser = argparse.ArgumentParser()
    router_args.RouterArgs.add_cli_args(parser, use_router_prefix=False)
    argv = ENGINE.router_argv(**ROUTER, policy="round_robin")
    read = router_args.RouterArgs.from_cli_args(parser.parse_args(argv[3:]),
                                                use_router_prefix=False)
    assert read.pd_disaggregation and read.policy == "round_robin"
    assert read.prefill_urls == ROUTER["prefill"] and read.decode_urls == ROUTER["decode"]
    assert (read.host, read.port) == ("10.0.0.1", 30080)
