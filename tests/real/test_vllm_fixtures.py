"""The facts a vLLM engine module relies on, asserted on captures of real vLLM 0.32.0 (CPU).

tests/data/vllm-0.32.0-cpu/ holds what real boots of the tiny model gave (its README says how
each file was captured; docs/VLLM_CONTRACT.md says where in vLLM's source each fact comes
from). These tests need no vLLM: they parse the captures, so they pin the log formats, the
metrics and the endpoints' answers that the engine module will parse, and they fail when a
recapture (a new vLLM version) changes one of them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm-0.32.0-cpu"

# label -> (tensor parallel, pipeline parallel) of the good boots that were captured.
GOOD = {"tp1": (1, 1), "pp2": (1, 2), "tp2": (2, 1)}
CAPTURED = [label for label in GOOD if (DATA / f"{label}-boot.log").exists()]

ENGINE_CONFIG = re.compile(
    r"Initializing a V1 LLM engine \(v(?P<version>[^)]+)\) with config: .*"
    r"tensor_parallel_size=(?P<tp>\d+), pipeline_parallel_size=(?P<pp>\d+), "
    r"data_parallel_size=(?P<dp>\d+)"
)
# One per worker process (vllm/distributed/parallel_state.py, logged by every rank).
WORKER_RANK = re.compile(
    r"world_size=(?P<world>\d+) rank=(?P<rank>\d+) local_rank=\d+ distributed_init_method=\S+ "
    r"backend=(?P<backend>\w+)"
)
# A worker's log prefix once its groups exist: Worker[_DPd][_PPd][_PCPd][_TPd][_DCPd][_EPd]
# (only the parallel kinds above 1 are named; vllm/v1/executor/multiproc_executor.py).
WORKER_NAME = re.compile(r"^\(Worker(?P<suffix>(?:_[A-Z]+\d+)*) pid=\d+\)")
KV = re.compile(
    r"(?P<device>[A-Z]+) KV cache size: (?P<tokens>[\d,]+) tokens, "
    r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x"
)
ENGINE_ERROR = re.compile(r"^\(EngineCore(?:_DP\d+)? pid=\d+\) ERROR ")
# The line that ends a Python traceback: "ValueError: ...", "Exception: ...", "a.b.Error: ...".
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*: ")
# Any vLLM process's ERROR line: (APIServer|EngineCore[_DPd]|Worker[_...] pid=N) ERROR ...
PROCESS_ERROR = re.compile(r"^\((?P<process>[A-Za-z]+(?:_[A-Z]+\d+)*) pid=(?P<pid>\d+)\) ERROR ")
WRAPPER = "RuntimeError: Engine core initialization failed. See root cause above."


def lines(name: str) -> list[str]:
    path = DATA / name
    assert path.exists(), f"missing capture {path} (see {DATA / 'README.md'})"
    return path.read_text().splitlines()


def metric_labels(text: list[str], name: str) -> dict[str, str]:
    """The labels of the first sample of metric ``name`` in Prometheus text."""
    for line in text:
        if line.startswith(name + "{"):
            body = line[len(name) + 1 : line.rindex("}")]
            return dict(re.findall(r'(\w+)="([^"]*)"', body))
    raise AssertionError(f"no sample of {name}")


def metric_total(text: list[str], name: str) -> float:
    """The sum of every sample of metric ``name`` (over all its label values)."""
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text
        if line.startswith(name + "{") or line.startswith(name + " ")
    ]
    assert values, f"no sample of {name}"
    return sum(values)


def test_every_layout_the_contract_names_was_captured() -> None:
    assert {"tp1", "pp2"} <= set(CAPTURED), CAPTURED
    for name in ("fail-boot.log", "fail-maxlen-boot.log", "fail-worker-boot.log"):
        assert (DATA / name).exists(), name


@pytest.mark.parametrize("label", CAPTURED)
def test_topology_comes_from_the_engine_config_line_and_the_worker_lines(label: str) -> None:
    tp, pp = GOOD[label]
    log = lines(f"{label}-boot.log")
    configs = [m for line in log if (m := ENGINE_CONFIG.search(line))]
    assert len(configs) == 1, f"{label}: {len(configs)} engine config lines"
    cfg = configs[0]
    assert cfg["version"] == "0.32.0"
    assert (int(cfg["tp"]), int(cfg["pp"]), int(cfg["dp"])) == (tp, pp, 1)
    ranks = [m for line in log if (m := WORKER_RANK.search(line))]
    assert sorted(int(m["rank"]) for m in ranks) == list(range(tp * pp))
    assert {int(m["world"]) for m in ranks} == {tp * pp}
    assert {m["backend"] for m in ranks} == {"gloo"}  # CPU: gloo process groups
    names = {m["suffix"] for line in log if (m := WORKER_NAME.match(line))}
    want = {
        (f"_PP{p}" if pp > 1 else "") + (f"_TP{t}" if tp > 1 else "")
        for p in range(pp)
        for t in range(tp)
    }
    assert want <= names, (want, names)


@pytest.mark.parametrize("label", CAPTURED)
def test_kv_capacity_in_the_log_matches_the_cache_config_metric(label: str) -> None:
    found = [m for line in lines(f"{label}-boot.log") if (m := KV.search(line))]
    assert len(found) == 1, f"{label}: {len(found)} KV cache lines"
    kv = found[0]
    tokens = int(kv["tokens"].replace(",", ""))
    max_len, conc = int(kv["len"].replace(",", "")), float(kv["conc"])
    assert kv["device"] == "CPU"  # the prefix is the device: GPU on CUDA
    assert max_len == 512 and tokens == int(conc * max_len)
    info = metric_labels(lines(f"{label}-metrics.txt"), "vllm:cache_config_info")
    assert int(info["kv_cache_size_tokens"]) == tokens
    assert int(info["num_gpu_blocks"]) * int(info["block_size"]) == tokens
    assert float(info["kv_cache_max_concurrency"]) == conc


@pytest.mark.parametrize("label", CAPTURED)
def test_readiness_lines_come_before_the_first_health_200(label: str) -> None:
    log = lines(f"{label}-boot.log")

    def first(pattern: str) -> int:
        hits = [i for i, line in enumerate(log) if re.search(pattern, line)]
        assert hits, f"{label}: no line matches {pattern!r}"
        return hits[0]

    started = first(r"Starting vLLM server on http://127\.0\.0\.1:\d+$")
    complete = first(r"Application startup complete\.$")
    health = first(r'"GET /health HTTP/1\.1" 200')
    assert started < complete < health
    assert not any("Starting vLLM API server" in line for line in log)


@pytest.mark.parametrize("label", CAPTURED)
def test_config_endpoint_is_absent_and_dev_endpoints_are_off(label: str) -> None:
    assert lines(f"{label}-inference-v1-config.status")[0] == "404"
    answers = dict(line.split(" -> ") for line in lines(f"{label}-endpoints.txt"))
    assert answers == {
        "GET /server_info": "404",
        "POST /reset_prefix_cache": "404",
        "POST /start_profile": "404",
    }
    assert json.loads((DATA / f"{label}-version.json").read_text()) == {"version": "0.32.0"}
    models = json.loads((DATA / f"{label}-models.json").read_text())
    assert models["data"][0]["max_model_len"] == 512


@pytest.mark.parametrize("label", CAPTURED)
def test_metrics_have_the_latency_histograms_and_prefix_cache_counters(label: str) -> None:
    text = lines(f"{label}-metrics.txt")
    types = {
        parts[2]: parts[3] for line in text if line.startswith("# TYPE") and (parts := line.split())
    }
    for name in (
        "time_to_first_token_seconds",
        "inter_token_latency_seconds",
        "request_time_per_output_token_seconds",
        "e2e_request_latency_seconds",
        "request_queue_time_seconds",
        "request_prefill_time_seconds",
        "request_decode_time_seconds",
        "request_num_preemptions",
    ):
        assert types.get(f"vllm:{name}") == "histogram", name
    for name in ("prefix_cache_queries", "prefix_cache_hits", "num_preemptions"):
        assert types.get(f"vllm:{name}_total") == "counter", name
    # 3 plain completions + 1 streamed + 1 with logprobs were served before the scrape.
    assert metric_total(text, "vllm:time_to_first_token_seconds_count") == 5
    assert metric_total(text, "vllm:request_success_total") == 5


@pytest.mark.parametrize("label", CAPTURED)
def test_a_streamed_completion_ends_with_a_usage_chunk(label: str) -> None:
    events = [
        line.removeprefix("data: ") for line in lines(f"{label}-stream-usage.sse") if line
    ]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 8
    assert all(c["choices"] for c in chunks[:-1])
    # Tokens may be coalesced into fewer chunks: count them from usage, never from chunks.
    assert 1 <= len(chunks) - 1 <= 8
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("label", CAPTURED)
def test_logprobs_give_the_top_k_with_the_chosen_token(label: str) -> None:
    body = json.loads((DATA / f"{label}-logprobs.json").read_text())
    lp = body["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 4
    for token, logprob, top in zip(
        lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True
    ):
        assert 2 <= len(top) <= 3  # top-2, plus the sampled token when it is not among them
        assert top[token] == logprob
    assert body["choices"][0]["text"] == "".join(lp["tokens"])


def test_the_root_cause_of_a_failed_boot_sits_above_the_wrapper() -> None:
    log = lines("fail-boot.log")
    wrappers = [i for i, line in enumerate(log) if line.startswith(WRAPPER)]
    assert len(wrappers) == 1, wrappers
    errors = [i for i, line in enumerate(log[: wrappers[0]]) if ENGINE_ERROR.match(line)]
    assert any("EngineCore failed to start." in log[i] for i in errors)
    process, cause = root_cause(log)
    assert process == "EngineCore"
    # 64 KiB is less than one KV block (128 tokens of 2 KiB each for this model).
    assert "ValueError: No available memory for the cache blocks." in cause, cause
    # The cause is neither the core's last ERROR line (a later one reports the worker's death)
    # nor anywhere in a 40-line tail, which holds only the APIServer's traceback and wrapper.
    assert log[errors[-1]] != cause and "died unexpectedly" in log[errors[-1]]
    assert not any(PROCESS_ERROR.match(line) for line in log[-40:])
    assert any(line.startswith(WRAPPER) for line in log[-40:])


def test_the_flag_list_comes_from_vllms_parser() -> None:
    text = lines("serve-flags.txt")
    assert text[0].startswith("# vllm 0.32.0: options of `vllm serve`")
    options = {opt for line in text[1:] for opt in line.split()}
    for flag in (
        "--tensor-parallel-size",
        "-tp",
        "--pipeline-parallel-size",
        "-pp",
        "--data-parallel-size",
        "--enable-expert-parallel",
        "--nnodes",
        "--node-rank",
        "--master-addr",
        "--master-port",
        "--headless",
        "--distributed-executor-backend",
        "--max-model-len",
        "--kv-cache-memory-bytes",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--served-model-name",
        "--port",
        "--host",
    ):
        assert flag in options, flag
    assert "--device" not in options  # gone in 0.32: the CPU platform is detected


def root_cause(log: list[str]) -> tuple[str, str]:
    """The process that failed first and the exception line that ends its first traceback.

    The rule a vLLM engine module can use to name the root cause of a failed boot: the process
    that failed first logs its traceback first (every line prefixed ``(PROCESS pid=N) ERROR``);
    the processes above it follow with wrappers ("WorkerProc initialization failed ... See stack
    trace for root cause", "Engine core initialization failed. See root cause above.") and with
    later ERROR lines (a worker "died unexpectedly") that are consequences, not causes.
    """
    first_pid = None
    in_traceback = False
    for line in log:
        m = PROCESS_ERROR.match(line)
        if not m or (first_pid is not None and m["pid"] != first_pid):
            continue
        message = line[m.end() :].split("] ", 1)[-1]
        if message.startswith("Traceback (most recent call last):"):
            first_pid, in_traceback = m["pid"], True
        elif in_traceback and EXCEPTION_LINE.match(message):
            return m["process"], line
    raise AssertionError("no traceback of a vLLM process")


def test_the_root_cause_rule_names_the_failing_process_in_both_failures() -> None:
    assert root_cause(lines("fail-boot.log"))[0] == "EngineCore"
    assert root_cause(lines("fail-worker-boot.log"))[0] == "Worker"


def test_a_kv_space_short_of_one_request_names_the_max_seq_len() -> None:
    log = lines("fail-maxlen-boot.log")
    process, cause = root_cause(log)
    assert process == "EngineCore"
    assert re.search(
        r"ValueError: To serve at least one request with the model's max seq len \(4096\), .*"
        r"the estimated maximum model length is \d+\.",
        cause,
    ), cause
    assert [line for line in log if line.startswith(WRAPPER)]
    assert not any(PROCESS_ERROR.match(line) for line in log[-40:])


def test_a_workers_root_cause_sits_above_the_engine_cores_error() -> None:
    log = lines("fail-worker-boot.log")
    process, cause = root_cause(log)
    assert process == "Worker"
    assert cause.endswith("ValueError: invalid literal for int() with base 10: ''"), cause
    core = [line for line in log if ENGINE_ERROR.match(line)]
    assert core[-1].endswith(
        "Exception: WorkerProc initialization failed due to an exception in a background "
        "process. See stack trace for root cause."
    ), core[-1]
    wrapper = [line for line in log if line.startswith(WRAPPER)]
    assert wrapper == [WRAPPER + " Failed core proc(s): {}"]
    assert not any(PROCESS_ERROR.match(line) for line in log[-40:])
