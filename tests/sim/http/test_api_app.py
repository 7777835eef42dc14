"""Rank-0 API of a one-node emulated server over real HTTP."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import DATA
from support.processes import wait_until
from support.sim import ClusterFactory, http, next_ports, sse_events

from pytest_ppsweep.sim.rank.localcluster import LocalCluster

API_KEY = "sk-very-secret-123"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """tiny profile, tp2 on one node, metrics on, an API key, context 4096."""
    tmp = tmp_path_factory.mktemp("api")
    port, dist = next_ports()
    c = LocalCluster(
        hosts=["127.0.9.1"], port=port, dist_port=dist,
        extra_args=["--model-path", "/models/tiny", "--tp-size", "2", "--enable-metrics",
                    "--api-key", API_KEY, "--context-length", "4096",
                    "--served-model-name", "tiny-x"],
        env={"PPSWEEP_SIM_TIME_SCALE": "2000", "PPSWEEP_SIM_PROFILE": "tiny",
             "PPSWEEP_SIM_STATE_DIR": str(tmp / "state"), "PPSWEEP_SIM_FAULTS": ""},
        log_dir=tmp / "logs",
    )  # fmt: skip
    c.start()
    try:
        c.wait_healthy(30)
        yield c
    finally:
        c.stop()


AUTH = {"Authorization": f"Bearer {API_KEY}"}


def get(c: LocalCluster, path: str) -> tuple[int, bytes, dict[str, str]]:
    return http("GET", c.base_url + path, headers=AUTH)


def post(c: LocalCluster, path: str, body: object) -> tuple[int, bytes, dict[str, str]]:
    return http("POST", c.base_url + path, body, headers=AUTH)


def test_health_ping_and_auth(server: LocalCluster) -> None:
    for path in ("/health", "/health_generate", "/ping"):
        status, body, _ = http("GET", server.base_url + path)
        assert (status, body) == (200, b"")
    assert http("GET", server.base_url + "/server_info")[0] == 401
    status, body, _ = get(server, "/no/such/route")
    assert status == 404 and json.loads(body) == {"detail": "Not Found"}


def test_server_info_shape(server: LocalCluster) -> None:
    _, body, _ = get(server, "/server_info")
    info = json.loads(body)
    real = json.loads((DATA / "sglang" / "n4-pp2tp2.server_info.json").read_text())
    minimal = [
        "model_path",
        "served_model_name",
        "tokenizer_path",
        "host",
        "port",
        "tp_size",
        "pp_size",
        "dp_size",
        "ep_size",
        "nnodes",
        "node_rank",
        "dist_init_addr",
        "moe_runner_backend",
        "moe_a2a_backend",
        "chunked_prefill_size",
        "disable_radix_cache",
        "mem_fraction_static",
        "max_running_requests",
        "max_total_tokens",
        "max_prefill_tokens",
        "pp_max_micro_batch_size",
        "disable_overlap_schedule",
        "disable_cuda_graph",
        "watchdog_timeout",
        "dist_timeout",
        "enable_metrics",
        "attention_backend",
        "context_length",
        "page_size",
        "status",
        "max_total_num_tokens",
        "max_req_input_len",
        "internal_states",
        "version",
        "launch_command",
        "startup_time",
        "frontend",
    ]  # contract §1.3 minimal payload + NEW extras
    for key in minimal:
        assert key in info, key
        if (
            key in real
            and real[key] is not None
            and info[key] is not None
            and key != "internal_states"
        ):
            assert type(info[key]) is type(real[key]), key
    assert info["version"] == "0.5.23" and info["frontend"] == "python"
    assert info["pp_max_micro_batch_size"] is None
    assert info["watchdog_timeout"] == 300
    ist = info["internal_states"][0]
    assert ist["pp_max_micro_batch_size"] == max(
        ist["effective_max_running_requests_per_dp"] // 1, 1
    )
    assert set(ist["memory_usage"]) >= {"weight", "kvcache", "token_capacity", "graph"}
    assert ist["world_size"] == 2 and "last_gen_throughput" in ist
    assert info["ppsweep_sim"]["simulated"] is True and info["ppsweep_sim"]["time_scale"] == 2000
    assert info["api_key"] == "<redacted>" and ist["api_key"] == "<redacted>"
    assert API_KEY not in body.decode()


def test_deprecated_aliases_log(server: LocalCluster) -> None:
    assert get(server, "/get_server_info")[0] == 200
    assert get(server, "/get_model_info")[0] == 200
    wait_until(lambda: "Endpoint '/get_server_info' is deprecated" in server.log(0), 5)
    wait_until(lambda: "Endpoint '/get_model_info' is deprecated" in server.log(0), 5)


def test_model_info_and_models(server: LocalCluster) -> None:
    info = json.loads(get(server, "/model_info")[1])
    assert info["is_generation"] is True and info["served_model_name"] == "tiny-x"
    models = json.loads(get(server, "/v1/models")[1])
    assert models["data"][0]["id"] == "tiny-x" and models["data"][0]["max_model_len"] == 4096


def test_generate_stream(server: LocalCluster) -> None:
    status, body, headers = post(
        server,
        "/generate",
        {
            "input_ids": list(range(100)),
            "sampling_params": {"max_new_tokens": 3, "ignore_eos": True},
            "stream": True,
        },
    )
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    counts = [len(c["output_ids"]) for c in chunks]  # the full list so far; tokens due together
    assert counts[-1] == 3 and all(a < b for a, b in itertools.pairwise(counts))
    for before, after in itertools.pairwise(chunks):  # share a chunk (engine.py)
        assert after["text"].startswith(before["text"])  # cumulative
        assert after["output_ids"][: len(before["output_ids"])] == before["output_ids"]
    meta = chunks[-1]["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 3}
    for key in (
        "id",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "e2e_latency",
        "weight_version",
        "num_retractions",
        "reasoning_tokens",
        "response_sent_to_client_ts",
        "first_token_latency",
        "ppsweep_due_ts",
    ):
        assert key in meta, key
    assert meta["prompt_tokens"] == 100 and meta["completion_tokens"] == 3
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert 0 < meta["first_token_latency"] <= meta["e2e_latency"]


def test_generate_non_stream_text(server: LocalCluster) -> None:
    status, body, _ = post(
        server,
        "/generate",
        {"text": "one two three four", "sampling_params": {"max_new_tokens": 2}},
    )
    out = json.loads(body)
    assert status == 200 and out["meta_info"]["prompt_tokens"] == 4 and len(out["output_ids"]) == 2
    status, body, _ = http("PUT", server.base_url + "/generate", {"text": "x"}, headers=AUTH)
    assert status == 200


def test_generate_errors(server: LocalCluster) -> None:
    status, body, _ = post(
        server, "/generate", {"text": "hi", "sampling_params": {"max_new_tokenz": 1}}
    )
    assert status == 400 and isinstance(json.loads(body)["error"], str)
    status, body, _ = post(server, "/generate", {"input_ids": list(range(5000))})
    assert status == 400
    assert json.loads(body)["error"]["message"] == (
        "The input (5000 tokens) is longer than the model's context length (4096 tokens)."
    )
    status, body, _ = post(server, "/generate", {"sampling_params": {}})
    assert status == 400 and "Either text, input_ids or input_embeds" in body.decode()


def test_completions(server: LocalCluster) -> None:
    status, body, _ = post(
        server, "/v1/completions", {"model": "tiny-x", "prompt": "a b c", "max_tokens": 2}
    )
    out = json.loads(body)
    assert (
        status == 200
        and out["usage"]["prompt_tokens"] == 3
        and out["usage"]["completion_tokens"] == 2
    )
    assert out["choices"][0]["finish_reason"] == "length"
    status, body, _ = post(
        server,
        "/v1/completions",
        {
            "model": "tiny-x",
            "prompt": [1, 2, 3, 4],
            "max_tokens": 3,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    deltas = [c["choices"][0]["text"] for c in chunks if c["choices"]]
    # deltas, not cumulative: three tokens in all, one or more a chunk (tokens due together
    # share one, sim/model/engine.py)
    assert 1 <= len(deltas) <= 3 and all(d.startswith(" ") for d in deltas)
    assert "".join(deltas).count(" ") == 3
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 7


def test_flush_cache_idle(server: LocalCluster) -> None:
    status, body, _ = post(server, "/flush_cache", None)
    assert status == 200 and body.decode().startswith("Cache flushed.")


def test_flush_cache_refused_while_busy(cluster: ClusterFactory) -> None:
    c = cluster(1, ["--tp-size", "2"], scale="10")  # slow clock: the request stays running
    c.wait_healthy(30)
    result: dict[str, int] = {}

    def long_request() -> None:
        body = {"input_ids": [1] * 100, "sampling_params": {"max_new_tokens": 5000}}
        result["status"] = http("POST", c.base_url + "/generate", body, timeout=60)[0]

    t = threading.Thread(target=long_request)
    t.start()
    try:
        wait_until(lambda: "#new-token: 100," in c.log(0), 10)
        status, body, _ = http("GET", c.base_url + "/flush_cache")
        assert status == 400 and body == b"Flush cache failed.\n"
    finally:
        t.join(60)
    assert result["status"] == 200
    assert http("POST", c.base_url + "/flush_cache")[0] == 200


def test_metrics(server: LocalCluster) -> None:
    post(server, "/generate", {"input_ids": [1] * 64, "sampling_params": {"max_new_tokens": 1}})
    text = http("GET", server.base_url + "/metrics")[1].decode()
    for name in (
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:num_requests_total",
        'sglang:time_to_first_token_seconds_bucket{le="0.1"',
        'le="400.0"',
        "sglang:e2e_request_latency_seconds_count",
    ):
        assert name in text, name
    assert "# TYPE sglang:time_to_first_token_seconds histogram" in text


def test_set_internal_state(server: LocalCluster) -> None:
    status, body, _ = post(
        server, "/set_internal_state", {"server_args": {"pp_max_micro_batch_size": 3}}
    )
    assert status == 200 and json.loads(body)["updated"] is True
    info = json.loads(get(server, "/server_info")[1])
    assert info["internal_states"][0]["pp_max_micro_batch_size"] == 3
    assert info["pp_max_micro_batch_size"] is None
    status, body, _ = post(
        server, "/set_internal_state", {"server_args": {"pp_max_micro_batch_size": 10**9}}
    )
    assert json.loads(body)["updated"] is False
    wait_until(lambda: "is rejected because it is out of the valid range [1, " in server.log(0), 5)


def test_logs_have_milestones(server: LocalCluster) -> None:
    log = server.log(0)
    first = log.splitlines()[0]
    assert "SIMULATED SGLang" in first and "time scale 2000x" in first
    for needle in (
        "server_args=",
        "[",
        "TP0] Init torch distributed begin.",
        "TP1] Init torch distributed ends.",
        "Load weight begin.",
        "Load weight end.",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: ",
        "Memory pool end.",
        "Capture cuda graph bs [",
        "max_total_num_tokens=",
        "Uvicorn running on http://127.0.9.1:",
        '"POST /generate HTTP/1.1" 200 OK',
        "The server is fired up and ready to roll!",
        "Prefill batch, #new-seq: 1, #new-token: ",
    ):
        assert needle in log, needle
    assert API_KEY not in log
    assert Path(server.log_dir).exists()
