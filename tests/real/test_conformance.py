"""Conformance of the emulator to real SGLang 0.5.23: one test set, run against both.

The session fixture ``service`` is parametrised over ``emulator`` and ``sglang``; each boots a
2-node PP2 service on loopback with the same launch arguments (the CPU flags of tests/real,
the tiny Llama; the emulator with a 1-GPU-per-node copy of its ``tiny`` profile). Every test
asserts what the plugin relies on (pytest_ppsweep/probe.py, bench.py, readiness.py; contract
§1): the fields it reads, their JSON types, the framing of the streams, the status codes.
Expected shapes are written down here from the real server (and its capture in
tests/data/sglang/); a difference is fixed in the emulator, so both parameters pass.

Real SGLang boots in the background from the first use of the fixture (40-60 s on 2 cores)
while the emulator's tests run; each service boots once per session.

Deliberate emulator extensions, allowed here and nowhere else: ``ppsweep_sim`` in server info,
``ppsweep_due_ts`` in every ``meta_info`` and ``response_sent_to_client_ts`` on every streamed
chunk (real SGLang stamps the first chunk only): tests/sim and benchmarks/ measure the
emulator's stream latency with them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from support.conformance import (
    EMULATOR_HOSTS,
    SGLANG_ENV,
    SGLANG_HOSTS,
    Service,
    emulator_profile,
    launch,
    ports,
    sim_env,
    stream,
    type_name,
    types_of,
    wait_ready,
)
from support.paths import DATA, REPO
from support.real import ProvisionImpossible, marked_processes, provision

from pytest_ppsweep.matrix.accuracyspec import AccuracySpec, read_tasks
from pytest_ppsweep.measure.bench import run_round_sync
from pytest_ppsweep.measure.completion import result_problems
from pytest_ppsweep.measure.workload import WorkloadSpec, generate_prompts
from pytest_ppsweep.results.accuracy import (
    Answer,
    LayoutAccuracy,
    accuracy_problems,
    layout_accuracy,
    read_accuracy,
)
from pytest_ppsweep.run.accuracy_step import AccuracyStep
from pytest_ppsweep.run.live import NoStatus
from pytest_ppsweep.service.probe import server_info, topology
from pytest_ppsweep.stats.accuracytest import plan

pytestmark = pytest.mark.slow

KINDS = ["emulator", "sglang"]
MODEL = "tiny-llama-h4"
BOOT_TIMEOUT_S = {"emulator": 60.0, "sglang": 240.0}
MIN_MEM_AVAILABLE_GIB = 5.0  # two tiny-model ranks (~2 GB + 1.4 GB) and the pytest process
CAPTURE = DATA / "sglang" / "n2-pp2.server_info.json"  # real 0.5.23, PP2
CONTEXT = 4096  # the tiny Llama's max_position_embeddings
FLUSH_OK = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running "
    "or waiting requests, the operation will not be performed.)\n"
)
SSE_TYPE = "text/event-stream; charset=utf-8"

# /server_info: what probe.topology and the plugin read, and the rest of the startup config
# the contract names (§1.3), with the JSON type of real 0.5.23 ("null": null unless passed).
SERVER_INFO_TYPES = {
    "version": "str", "tp_size": "int", "pp_size": "int", "ep_size": "int", "dp_size": "int",
    "nnodes": "int", "node_rank": "int", "moe_runner_backend": "str", "moe_a2a_backend": "str",
    "chunked_prefill_size": "int", "disable_radix_cache": "bool", "mem_fraction_static": "float",
    "pp_max_micro_batch_size": "null", "max_running_requests": "null",
    "max_total_num_tokens": "int", "max_req_input_len": "int", "max_total_tokens": "int",
    "max_prefill_tokens": "int", "model_path": "str", "served_model_name": "str",
    "tokenizer_path": "str", "host": "str", "port": "int", "dist_init_addr": "str",
    "disable_overlap_schedule": "bool", "watchdog_timeout": "int", "dist_timeout": "null",
    "enable_metrics": "bool", "attention_backend": "str", "context_length": "null",
    "page_size": "int", "status": "str", "launch_command": "str", "startup_time": "dict",
    "internal_states": "list", "frontend": "str", "api_key": "null", "admin_api_key": "null",
    "ssl_keyfile_password": "null",
}  # fmt: skip
INTERNAL_STATE_TYPES = {
    "pp_max_micro_batch_size": "int", "effective_max_running_requests_per_dp": "int",
    "max_running_requests": "null", "world_size": "int", "last_gen_throughput": "float",
    "memory_usage": "dict", "pp_size": "int", "tp_size": "int",
}  # fmt: skip
MEMORY_USAGE_KEYS = {"weight", "kvcache", "startup_available", "token_capacity",
                     "token_capacity_swa", "graph"}  # fmt: skip
MODEL_INFO_TYPES = {
    "model_path": "str", "served_model_name": "str", "tokenizer_path": "str",
    "is_generation": "bool", "preferred_sampling_params": "null", "weight_version": "str",
    "load_format": "str", "reasoning_parser": "null", "tool_call_parser": "null",
    "disaggregation_mode": "str", "has_image_understanding": "bool",
    "has_audio_understanding": "bool", "model_type": "str", "architectures": "list",
    "embedding": "dict",
}  # fmt: skip
# meta_info of /generate (NEW, non-incremental streaming, metrics off)
META_EVERY_CHUNK = {
    "id": "str", "finish_reason": "null", "prompt_tokens": "int", "weight_version": "str",
    "num_retractions": "int", "reasoning_tokens": "int", "completion_tokens": "int",
    "cached_tokens": "int", "dp_rank": "null",
}  # fmt: skip
META_FINAL = META_EVERY_CHUNK | {
    "finish_reason": "dict", "weight_versions": "list", "e2e_latency": "float",
}  # fmt: skip
META_EXTENSIONS = {"ppsweep_due_ts", "response_sent_to_client_ts"}  # emulator only, see above
UNKNOWN_FIELD = (
    "unknown field `bogus_key`, expected one of `max_new_tokens`, `stop`, `stop_token_ids`, "
    "`stop_regex`, `temperature`, `top_p`, `top_k`, `min_p`, `frequency_penalty`, "
    "`presence_penalty`, `repetition_penalty`, `min_new_tokens`, `n`, `json_schema`, `regex`, "
    "`ebnf`, `structural_tag`, `ignore_eos`, `skip_special_tokens`, "
    "`spaces_between_special_tokens`, `no_stop_trim`, `stream_interval`, `logit_bias`, "
    "`sampling_seed`, `custom_params`, `beam_width`, `watermark`, `choice`"
)


def _mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0


@dataclass
class Services:
    """Both services of the session; real SGLang is launched (not awaited) on first use."""

    root: Path
    mark: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    launched: dict[str, Service] = field(default_factory=dict)
    why_not: dict[str, str] = field(default_factory=dict)
    started: bool = False

    def _start(self) -> None:
        self.started = True
        sglang_port, sglang_dist, sim_port, sim_dist = ports()
        models = self.root / "no-models"
        if not Path("/proc").is_dir() or not hasattr(os, "sched_getaffinity"):
            self.why_not["sglang"] = "real SGLang on CPU needs Linux"
        elif (mem := _mem_available_gib()) < MIN_MEM_AVAILABLE_GIB:
            self.why_not["sglang"] = (
                f"{mem:.1f} GiB of RAM available, {MIN_MEM_AVAILABLE_GIB} needed"
            )
        else:
            try:
                prov = provision()
            except ProvisionImpossible as exc:
                self.why_not["sglang"] = f"cannot provision real SGLang here: {exc}"
            else:
                model = prov.models[MODEL]
                models = Path(model)
                self.launched["sglang"] = launch(
                    "sglang", python=prov.python, model_path=model, hosts=SGLANG_HOSTS,
                    port=sglang_port, dist_port=sglang_dist, log_dir=self.root / "sglang",
                    env=SGLANG_ENV, mark=self.mark, boot_timeout_s=BOOT_TIMEOUT_S["sglang"],
                )  # fmt: skip
        # The emulator serves the same model path (the tiny Llama's shape in its profile).
        model_dir = models if models.is_dir() else self.root / "tiny-llama"
        if not models.is_dir():  # no provisioned model: the emulator still runs
            model_dir.mkdir(exist_ok=True)
            (model_dir / "config.json").write_text(json.dumps({
                "model_type": "llama", "architectures": ["LlamaForCausalLM"],
                "num_hidden_layers": 4, "vocab_size": 256, "max_position_embeddings": CONTEXT,
            }))  # fmt: skip
        profile = emulator_profile(model_dir, self.root / "tiny-1gpu.toml")
        state = self.root / "gpustate"
        state.mkdir(exist_ok=True)
        self.launched["emulator"] = launch(
            "emulator", python=sys.executable, model_path=str(model_dir),
            hosts=EMULATOR_HOSTS, port=sim_port, dist_port=sim_dist,
            log_dir=self.root / "emulator", env=sim_env(profile, state), mark=self.mark,
            boot_timeout_s=BOOT_TIMEOUT_S["emulator"],
        )  # fmt: skip

    def get(self, kind: str) -> Service:
        if not self.started:
            self._start()
        if kind in self.why_not:
            pytest.skip(self.why_not[kind])
        service = self.launched[kind]
        wait_ready(service)
        return service

    def stop(self) -> None:
        for service in self.launched.values():
            service.stop()
        deadline = time.monotonic() + 5
        while (left := marked_processes(self.mark)) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid, _cmd in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"processes left running: {left}"


# Module scope: both services stop when this file's tests end. Real SGLang's CPU schedulers
# spin even when idle, so keeping them for the whole session would slow every later test.
@pytest.fixture(scope="module")
def _services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    both = Services(tmp_path_factory.mktemp("conformance"))
    try:
        yield both
    finally:
        both.stop()


@pytest.fixture(scope="module", params=KINDS)
def service(request: pytest.FixtureRequest, _services: Services) -> Service:
    """One booted 2-node PP2 service: the emulator or real SGLang 0.5.23 (CPU)."""
    return _services.get(request.param)


@pytest.fixture(scope="module")
def info(service: Service) -> dict[str, Any]:
    return server_info(service.url())


def _prompt(n: int) -> list[int]:
    """Token ids no earlier request shares a prefix with (no radix-cache hit on real SGLang)."""
    first = 3 + uuid.uuid4().int % 250
    return [first] + [(first * 7 + j) % 256 for j in range(1, n)]


def _gen_body(ids: list[int], new: int, **extra: Any) -> dict[str, Any]:
    params = {"max_new_tokens": new, "temperature": 0.0, "ignore_eos": True}
    return {"input_ids": ids, "sampling_params": params, **extra}


def _check_types(obj: dict[str, Any], expected: dict[str, str], where: str) -> None:
    got = types_of(obj, expected)
    assert got == expected, f"{where}: types differ " + str(
        {k: (got[k], v) for k, v in expected.items() if got[k] != v}
    )


def _type_tree(value: Any) -> Any:
    """The JSON types of a value, nested dicts (and internal_states[0]) expanded."""
    if isinstance(value, dict):
        return {k: _type_tree(v) for k, v in value.items()}
    return type_name(value)


def _diff_types(real: Any, got: Any, path: str = "") -> list[str]:
    """Type differences of the keys both trees have (``got`` may have fewer keys)."""
    if isinstance(real, dict) and isinstance(got, dict):
        return [
            d for k in got.keys() & real.keys() for d in _diff_types(real[k], got[k], f"{path}.{k}")
        ]
    return [] if real == got else [f"{path}: real {real}, here {got}"]


# ---------------------------------------------------------------- readiness (readiness.py)


def test_health_phases(service: Service) -> None:
    """Rank 0: refused before uvicorn, 503 while starting (may be too short to see), 200 when
    ready; ranks >= 1: refused, then 200 (dummy health server)."""
    rank0, *others = service.phases
    assert rank0 in ([None, 503, 200], [None, 200]), service.phases
    assert all(seen == [None, 200] for seen in others), service.phases


def test_rank0_health_and_ping(service: Service) -> None:
    for path in ("/health", "/health_generate", "/ping"):
        resp = requests.get(service.url() + path, timeout=30)
        assert (resp.status_code, resp.content) == (200, b""), path


def test_other_ranks_serve_only_health(service: Service) -> None:
    url = service.url(1)
    for path in ("/health", "/health_generate", "/ping"):
        resp = requests.get(url + path, timeout=10)
        assert (resp.status_code, resp.content) == (200, b""), path
    for path in ("/server_info", "/get_server_info", "/model_info", "/v1/models"):
        resp = requests.get(url + path, timeout=10)
        assert (resp.status_code, resp.json()) == (404, {"detail": "Not Found"}), path


# ---------------------------------------------------------------- server info (probe.py)


def test_server_info_fields_and_types(info: dict[str, Any]) -> None:
    _check_types(info, SERVER_INFO_TYPES, "/server_info")
    states = info["internal_states"]
    assert isinstance(states, list) and len(states) == 1  # one per DP rank
    _check_types(states[0], INTERNAL_STATE_TYPES, "internal_states[0]")
    assert set(states[0]["memory_usage"]) == MEMORY_USAGE_KEYS
    assert info["version"] == "0.5.23" and info["status"] == "ready"
    assert info["frontend"] == "python"


def test_server_info_topology(info: dict[str, Any]) -> None:
    """What probe.topology makes of it: the launch's layout and the effective micro-batch."""
    topo = topology(info)
    state = info["internal_states"][0]
    assert (topo.pp, topo.tp, topo.ep, topo.nnodes) == (2, 1, 1, 2)
    assert (topo.moe_runner_backend, topo.moe_a2a_backend) == ("auto", "none")
    assert topo.version == "0.5.23" and info["pp_max_micro_batch_size"] is None
    assert topo.pp_max_micro_batch_size == max(
        state["effective_max_running_requests_per_dp"] // 2, 1
    )
    assert topo.max_running_requests == state["effective_max_running_requests_per_dp"]
    assert info["max_total_num_tokens"] == state["memory_usage"]["token_capacity"] == 8192
    assert info["chunked_prefill_size"] == 4096 and info["disable_radix_cache"] is False
    assert 0 < info["mem_fraction_static"] < 1
    assert info["disable_overlap_schedule"] is True  # forced with PP > 1
    assert info["max_req_input_len"] < CONTEXT
    assert "--pp-size 2" in info["launch_command"]


def test_server_info_types_match_the_real_capture(info: dict[str, Any]) -> None:
    """Every key also in the captured real /server_info (same flags, 2-node PP2) has its type;
    the only key not in the capture is the emulator's ``ppsweep_sim`` marker."""
    real = json.loads(CAPTURE.read_text())
    assert set(info) - set(real) <= {"ppsweep_sim"}
    assert set(info["internal_states"][0]) <= set(real["internal_states"][0])
    assert not _diff_types(_type_tree(real), _type_tree(info))
    assert not _diff_types(
        _type_tree(real["internal_states"][0]), _type_tree(info["internal_states"][0])
    )


def test_get_server_info_alias(service: Service, info: dict[str, Any]) -> None:
    resp = requests.get(service.url() + "/get_server_info", timeout=30)
    assert resp.status_code == 200 and set(resp.json()) == set(info)


# ---------------------------------------------------------------- model discovery


def test_model_info(service: Service) -> None:
    bodies = [
        requests.get(service.url() + p, timeout=30) for p in ("/model_info", "/get_model_info")
    ]
    assert [b.status_code for b in bodies] == [200, 200]
    first, second = (b.json() for b in bodies)
    assert first == second
    _check_types(first, MODEL_INFO_TYPES, "/model_info")
    assert set(first) == set(MODEL_INFO_TYPES)
    assert first["model_path"] == first["served_model_name"] == service.model_path
    assert first["architectures"] == ["LlamaForCausalLM"] and first["model_type"] == "llama"
    assert first["is_generation"] is True and first["embedding"]["enabled"] is False


def test_v1_models(service: Service) -> None:
    body = requests.get(service.url() + "/v1/models", timeout=30).json()
    assert set(body) == {"object", "data"} and body["object"] == "list"
    [model] = body["data"]
    assert model == {
        "id": service.model_path, "object": "model", "created": model["created"],
        "owned_by": "sglang", "root": service.model_path, "parent": None,
        "max_model_len": CONTEXT,
    }  # fmt: skip
    assert isinstance(model["created"], int)


# ---------------------------------------------------------------- /generate (bench.py)


def _check_meta(meta: dict[str, Any], expected: dict[str, str], where: str) -> None:
    _check_types(meta, expected, where)
    extra = set(meta) - set(META_FINAL) - {"cached_tokens_details"} - META_EXTENSIONS
    assert not extra, f"{where}: unexpected keys {extra}"
    details = meta.get("cached_tokens_details", "absent")
    assert details is None or (  # a dict only after a radix-cache hit
        isinstance(details, dict) and set(details) == {"device", "host"}
    ), f"{where}: cached_tokens_details {details!r}"
    for key in META_EXTENSIONS & set(meta):
        assert isinstance(meta[key], float), f"{where}: {key}"


def test_generate_stream_framing(service: Service) -> None:
    ids = _prompt(6)
    got = stream(service.url() + "/generate", _gen_body(ids, 4, stream=True))
    assert (got.status, got.content_type) == (200, SSE_TYPE)
    assert got.raw.endswith(b"\n\ndata: [DONE]\n\n") and got.raw.startswith(b"data: {")
    *chunks, done = got.events
    assert done == "[DONE]" and 1 <= len(chunks) <= 4
    assert all(
        isinstance(c, dict) and set(c) == {"text", "output_ids", "meta_info"} for c in chunks
    )
    for i, chunk in enumerate(chunks):
        meta, final = chunk["meta_info"], i == len(chunks) - 1
        _check_meta(meta, META_FINAL if final else META_EVERY_CHUNK, f"chunk {i}")
        assert isinstance(chunk["text"], str)
        assert meta["completion_tokens"] == len(chunk["output_ids"])  # the full list so far
        assert meta["prompt_tokens"] == len(ids) and meta["num_retractions"] == 0
        if i:
            before = chunks[i - 1]
            assert chunk["text"].startswith(before["text"])  # cumulative text
            assert chunk["output_ids"][: len(before["output_ids"])] == before["output_ids"]
            assert meta["completion_tokens"] > before["meta_info"]["completion_tokens"]
            assert meta["id"] == before["meta_info"]["id"]
    assert isinstance(chunks[0]["meta_info"]["response_sent_to_client_ts"], float)
    final = chunks[-1]["meta_info"]
    assert final["finish_reason"] == {"type": "length", "length": 4}
    assert final["completion_tokens"] == 4 and final["e2e_latency"] > 0
    assert final["weight_versions"] == [{"version": "default", "start": 0, "end": 4}]


def test_generate_non_stream(service: Service) -> None:
    ids = _prompt(6)
    resp = requests.post(service.url() + "/generate", json=_gen_body(ids, 3), timeout=60)
    assert resp.status_code == 200
    assert resp.headers["Content-Type"].startswith("application/json")
    body = resp.json()
    assert set(body) == {"text", "output_ids", "meta_info"} and isinstance(body["text"], str)
    _check_meta(body["meta_info"], META_FINAL, "meta_info")
    assert len(body["output_ids"]) == body["meta_info"]["completion_tokens"] == 3
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 3}
    assert isinstance(body["meta_info"]["response_sent_to_client_ts"], float)


def test_generate_rejects_unknown_sampling_params(service: Service) -> None:
    for streamed in (False, True):  # the schema gate answers before any stream starts
        body = {"input_ids": [5, 6, 7], "stream": streamed,
                "sampling_params": {"max_new_tokens": 2, "bogus_key": 1}}  # fmt: skip
        resp = requests.post(service.url() + "/generate", json=body, timeout=30)
        assert (resp.status_code, resp.json()) == (400, {"error": UNKNOWN_FIELD}), streamed


def test_generate_input_longer_than_context(service: Service) -> None:
    url = service.url() + "/generate"
    too_long = (
        f"The input (5000 tokens) is longer than the model's context length ({CONTEXT} tokens)."
    )
    resp = requests.post(url, json=_gen_body([5] * 5000, 4), timeout=30)
    assert (resp.status_code, resp.json()) == (400, {"error": {"message": too_long}})
    # streamed: a ValueError inside the stream, HTTP 200
    got = stream(url, _gen_body([5] * 5000, 4, stream=True))
    assert (got.status, got.content_type) == (200, SSE_TYPE)
    assert got.events == [
        {"error": {"message": too_long, "type": "invalid_request_error", "code": 400,
                   "retryable": False}},
        "[DONE]",
    ]  # fmt: skip
    # input + max_new_tokens beyond the context
    resp = requests.post(url, json=_gen_body([5] * (CONTEXT - 1), 4), timeout=30)
    assert resp.status_code == 400
    assert resp.json() == {"error": {"message": (
        f"Requested token count exceeds the model's maximum context length of {CONTEXT} tokens. "
        f"You requested a total of {CONTEXT + 3} tokens: {CONTEXT - 1} tokens from the input "
        "messages and 4 tokens for the completion. Please reduce the number of tokens in the "
        "input messages or the completion to fit within the limit.")}}  # fmt: skip


# ---------------------------------------------------------------- /v1/completions


def _completion_body(ids: list[int], n: int, **extra: Any) -> dict[str, Any]:
    return {"prompt": ids, "max_tokens": n, "temperature": 0, "ignore_eos": True, **extra}


def _check_completion_chunk(chunk: dict[str, Any], model: str) -> None:
    assert set(chunk) == {"id", "object", "created", "model", "choices", "usage"}
    assert chunk["object"] == "text_completion" and chunk["model"] == model
    assert isinstance(chunk["id"], str) and isinstance(chunk["created"], int)


def test_completions_stream_deltas_and_usage(service: Service) -> None:
    url, model, ids, rid = service.url(), service.model_path, _prompt(5), uuid.uuid4().hex
    # the same greedy request (and, for the emulator, the same rid) gives the same text
    whole = requests.post(url + "/generate", json=_gen_body(ids, 3, rid=rid), timeout=60).json()
    assert requests.post(url + "/flush_cache", timeout=30).status_code == 200  # same prefill
    body = _completion_body(ids, 3, model=model, rid=rid, stream=True,
                            stream_options={"include_usage": True})  # fmt: skip
    got = stream(url + "/v1/completions", body)
    assert (got.status, got.content_type) == (200, SSE_TYPE)
    *chunks, usage_chunk, done = got.events
    assert done == "[DONE]" and 1 <= len(chunks) <= 3
    for i, chunk in enumerate(chunks):
        _check_completion_chunk(chunk, model)
        [choice] = chunk["choices"]
        assert set(choice) == {"index", "text", "logprobs", "finish_reason", "matched_stop"}
        assert (choice["index"], choice["logprobs"], choice["matched_stop"]) == (0, None, None)
        assert choice["finish_reason"] == ("length" if i == len(chunks) - 1 else None)
        assert chunk["usage"] is None
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["text"]  # deltas
    _check_completion_chunk(usage_chunk, model)
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {  # nulls left out
        "prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3, "reasoning_tokens": 0,
    }  # fmt: skip


def test_completions_stream_without_usage(service: Service) -> None:
    body = _completion_body(_prompt(4), 2, model=service.model_path, stream=True)
    got = stream(service.url() + "/v1/completions", body)
    *chunks, done = got.events
    assert done == "[DONE]" and chunks
    assert all(c["choices"] and c["usage"] is None for c in chunks)


def test_completions_non_stream(service: Service) -> None:
    body = _completion_body(_prompt(4), 3, model=service.model_path)
    resp = requests.post(service.url() + "/v1/completions", json=body, timeout=60)
    assert resp.status_code == 200
    out = resp.json()
    assert set(out) == {"id", "object", "created", "model", "choices", "usage", "metadata"}
    [choice] = out["choices"]
    assert choice["finish_reason"] == "length" and isinstance(choice["text"], str)
    assert out["usage"] == {
        "prompt_tokens": 4, "total_tokens": 7, "completion_tokens": 3,
        "prompt_tokens_details": None, "reasoning_tokens": 0, "completion_tokens_details": None,
    }  # fmt: skip
    assert out["metadata"] == {
        "weight_version": "default",
        "weight_versions": [{"version": "default", "start": 0, "end": 3}],
    }


def test_completions_input_longer_than_context(service: Service) -> None:
    message = (
        f"The input (5000 tokens) is longer than the model's context length ({CONTEXT} tokens)."
    )
    for streamed in (False, True):
        body = _completion_body([5] * 5000, 3, model=service.model_path, stream=streamed)
        resp = requests.post(service.url() + "/v1/completions", json=body, timeout=30)
        assert resp.status_code == 400, streamed
        assert resp.json() == {"object": "error", "message": message, "type": "BadRequestError",
                               "param": None, "code": 400}  # fmt: skip


# ---------------------------------------------------------------- /flush_cache


def test_flush_cache(service: Service) -> None:
    for method in ("GET", "POST"):
        resp = requests.request(method, service.url() + "/flush_cache", timeout=30)
        assert (resp.status_code, resp.text) == (200, FLUSH_OK), method


# ---------------------------------------------------------------- the plugin's own reader


@pytest.mark.parametrize("api", ["generate", "completions"])
def test_bench_round_reads_every_request(service: Service, api: str) -> None:
    """pytest_ppsweep.measure.bench over this service: every request complete, with the server's
    token counts and finish reason parsed from the stream. The bodies the plugin really sends
    carry ``ignore_eos`` where SGLang reads it (``sampling_params`` of /generate, top level of
    /v1/completions), so the server produces exactly the asked 6 tokens (a tiny random model
    would often stop at EOS earlier), and the N/N rule's completion-token part holds."""
    spec = WorkloadSpec(input_len=16, output_len=6, range_ratio=1.0, num_requests=4, seed=7,
                        vocab_size=256, warmup_requests=1, api=api, request_timeout_s=60,
                        round_timeout_s=120)  # fmt: skip
    prompts = generate_prompts(spec)
    model = None if api == "generate" else service.model_path
    for body in prompts.bodies(spec, model):
        sent = json.loads(body)
        asked = sent["sampling_params"] if api == "generate" else sent
        assert asked["ignore_eos"] is True and asked.get("max_new_tokens",
                                                         asked.get("max_tokens")) == 6
    result = run_round_sync(service.url(), prompts, 2, spec=spec)
    assert (result.completed, result.failed) == (4, 0), result.errors
    assert (result.output_tokens, result.output_tokens_nominal) == (24, 24)
    assert result_problems(result) == []
    for rec in result.records:
        assert (rec["prompt_tokens"], rec["completion_tokens"]) == (16, 6), rec
        assert rec["finish_reason"] == "length" and rec["http_status"] == 200
        assert isinstance(rec["ttft_s"], float) and rec["ttft_s"] <= rec["e2e_s"]
    if api == "generate":
        assert all(isinstance(r["server_e2e_latency"], float) for r in result.records)
        assert all(isinstance(r["cached_tokens"], int) for r in result.records)


# ---------------------------------------------------------------- task accuracy (accuracy_step.py)

# cpu.toml's task file: 2 shots and 16 questions whose answers are tiny-qwen3moe's own greedy
# answers (tools/capture_task_answers.py; tests/real/test_real_sglang.py shows qwen3moe scores
# them 100 % again). This service is another model (the tiny Llama; the emulator's stand-in).
CPU_TASKS = REPO / "test_matrix" / "cpu_tasks.jsonl"


def _task_spec(path: Path, backend: str = "builtin") -> AccuracySpec:
    return AccuracySpec(tasks_path=path, tasks=read_tasks(path, str(path)), few_shot=2,
                        max_tokens=4, concurrency=4, backend=backend)


def _evaluate(service: Service, spec: AccuracySpec, folder: Path,
              compare_ref: Path | None = None) -> tuple[LayoutAccuracy, list[str]]:
    """The accuracy check of run/accuracy_step.py on this live service, as a sweep runs it
    (its score in ``folder``/accuracy/pp2.json; the printed lines returned)."""
    lines: list[str] = []
    ctx: Any = SimpleNamespace(sweep=SimpleNamespace(accuracy=spec, model_path=service.model_path),
                               store=SimpleNamespace(dir=folder), progress=lines.append,
                               live=NoStatus())
    booted: Any = SimpleNamespace(
        service=SimpleNamespace(target_url=service.url(),
                                config=SimpleNamespace(id="pp2", engine="sglang")),
        config=SimpleNamespace(id="pp2", engine="sglang"), boot_id="pp2", check_alive=lambda: None)
    AccuracyStep(ctx, compare_ref).check(booted)
    stored = read_accuracy(folder, "pp2")
    assert stored is not None, lines
    return stored, lines


def _answers(folder: Path) -> dict[int, str]:
    lines = (folder / "accuracy" / "pp2.answers.jsonl").read_text().splitlines()
    return {int(a["index"]): a["extracted"] for a in map(json.loads, lines)}


def _backends(service: Service) -> list[str]:
    """Both backends on real SGLang (lm-eval is in the test extras); the builtin one on the
    emulator (its /v1/completions conformance is above)."""
    if service.kind != "sglang":
        return ["builtin"]
    assert importlib.util.find_spec("lm_eval"), "lm-eval is a test extra: pip install -e .[test]"
    return ["builtin", "lm-eval"]


def test_accuracy_of_the_models_own_answers_is_stable(service: Service, tmp_path: Path) -> None:
    """A task file whose answers are this service's own greedy answers (captured by a first
    evaluation) scores 16/16 on every later evaluation, with either backend, and lm-eval's
    local-completions answers each question as the builtin client does (same prompts, greedy)."""
    capture = tmp_path / "capture"
    _evaluate(service, _task_spec(CPU_TASKS), capture)
    own = tmp_path / "own.jsonl"
    shutil.copyfile(CPU_TASKS, own)
    done = subprocess.run([sys.executable, str(REPO / "tools" / "capture_task_answers.py"),
                           str(capture), "pp2", str(own)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert done.returncode == 0, done.stderr
    answers = _answers(capture)
    for backend in _backends(service):
        folder = tmp_path / backend
        stored, lines = _evaluate(service, _task_spec(own, backend), folder)
        assert (stored.n, stored.correct, stored.errors) == (16, 16, 0), (backend, lines)
        assert _answers(folder) == answers, backend
        assert "pp2: accuracy 100.0 % (16/16), 95 % Wilson interval [80.6, 100.0]" in lines[-1]


def test_accuracy_drops_on_another_models_answers(service: Service, tmp_path: Path) -> None:
    """Gated against a baseline whose score of cpu.toml's task is 16/16 (tiny-qwen3moe, whose
    answers they are), this other model scores far lower with either backend: test_accuracy's
    rule fails it, naming both scores, their intervals, n and the threshold."""
    baseline = tmp_path / "baseline"
    spec = _task_spec(CPU_TASKS)
    layout_accuracy(spec, plan(spec.min_drop, spec.alpha, spec.beta, 16), "pp2",
                    [Answer(i, "", "", True) for i in range(16)]).write(baseline)
    for backend in _backends(service):
        folder = tmp_path / backend
        stored, lines = _evaluate(service, _task_spec(CPU_TASKS, backend), folder, baseline)
        assert stored.n == 16 and stored.errors == 0, lines
        assert any("pp2: accuracy passes at ≥ 70.9 % (vs pp2 of the baseline run baseline, "
                   "100.0 % [80.6, 100.0] (16/16))" in line for line in lines), lines
        problems = accuracy_problems(folder, "pp2", baseline)
        assert len(problems) == 1 and stored.correct < 12, (backend, stored, problems)
        assert problems[0].startswith(f"pp2: accuracy {stored.shown()} of n = 16 is below the "
                                      "threshold 70.9 % against pp2 of the baseline run "
                                      "baseline's 100.0 % [80.6, 100.0] (16/16) of n = 16")
