"""SGLang as the plugin knows it, read from engine/sglang.py alone: the rank's command line (the
same argv as before the engine had a module), the EP rewrite, the server info read, the topology
check, the native API's stream events and the flag probe."""

from __future__ import annotations

import pytest

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
