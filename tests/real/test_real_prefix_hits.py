"""A Mooncake-format trace and a shared-prefix workload replayed against real SGLang 0.5.23 on
CPU, their achieved prefix hit rate read from the server itself: ``--enable-metrics``' cached and
prompt token counters as deltas over each round, held against the rate the prompts' sharing
implies (measure/tracereplay.py), as a sweep's rounds do.

One boot (one node, PP1, of the tiny Llama with the conformance tests' CPU flags), with a KV
pool larger than the trace's distinct tokens so that no eviction lowers the hits; each round at
C = 1, so every request finds its predecessors' prefixes already cached, as the implied rate
assumes. The workloads come from a sweep file, through the sweep's own reader and prompts."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.conformance import SGLANG_ENV, Service, launch, ports, wait_ready
from support.paths import DATA
from support.real import ProvisionImpossible, marked_processes, provision

from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.measure.bench import run_round_sync
from pytest_ppsweep.measure.completion import result_problems
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.run.workloads import make_prompts, workload_spec

pytestmark = pytest.mark.slow

HOSTS = ("127.0.15.21",)  # beside the conformance services' addresses
MODEL = "tiny-llama-h4"  # vocabulary 256, context 4,096
MIN_MEM_AVAILABLE_GIB = 5.0
SMALL = DATA / "mooncake" / "small.jsonl"
# The trace's first 12 requests (two or three turns of each conversation and its one-offs:
# 7,972 prompt tokens, 355 output tokens), their 3.4 s compressed to 0.34 s; 10 requests of 256
# tokens, 8 of which start with one 192-token prefix.
SWEEP = f"""
[sweep]
name = "prefix-hits"
model_path = "/nowhere"
cluster = "one"

[[configs]]
pp = 1
tp = 1

[workload]
concurrency = [1]
repeats = 1
vocab_size = 256
request_timeout_s = 120
round_timeout_s = 240

[workloads.replay]
type = "trace"
path = "{SMALL}"
num_requests = 12
time_scale = 0.1

[workloads.shared]
type = "shared_prefix"
input_len = 256
output_len = 2
num_requests = 10
prefix_len = 192
prefix_share = 0.8

[clusters.one]
kind = "local"
hosts = ["127.0.0.1"]
gpus_per_node = 1
server_module = "sglang.launch_server"
port = 30000
dist_init_port = 30100
nvidia_smi = []
"""


def _mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0


@pytest.fixture(scope="module")
def sglang(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """Real SGLang with its metrics on and a KV pool of 32K tokens, stopped after the module."""
    if _mem_available_gib() < MIN_MEM_AVAILABLE_GIB:
        pytest.skip(f"{_mem_available_gib():.1f} GiB of RAM available, "
                    f"{MIN_MEM_AVAILABLE_GIB} needed")
    try:
        prov = provision()
    except ProvisionImpossible as exc:
        pytest.skip(f"cannot provision real SGLang here: {exc}")
    mark = uuid.uuid4().hex[:12]
    port, dist, _, _ = ports()
    service = launch("sglang", python=prov.python, model_path=prov.models[MODEL], hosts=HOSTS,
                     port=port + 1, dist_port=dist + 30, log_dir=tmp_path_factory.mktemp("sglang"),
                     env=SGLANG_ENV, mark=mark, boot_timeout_s=240.0,
                     extra=("--pp-size", "1", "--enable-metrics", "--max-total-tokens", "32768"))
    try:
        wait_ready(service)
        yield service
    finally:
        service.stop()
        deadline = time.monotonic() + 5
        while (left := marked_processes(mark)) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid, _cmd in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"processes left running: {left}"


def _round(service: Service, tmp_path: Path, name: str) -> RoundResult:
    (tmp_path / "ppsweep.toml").write_text(SWEEP)
    workload = load(tmp_path / "ppsweep.toml").workloads[name]
    spec = workload_spec(workload)
    prompts = make_prompts(workload, spec)
    result = run_round_sync(service.url(), prompts, 1, spec=spec, engine=engine_of("sglang"))
    assert (result.completed, result.failed) == (spec.num_requests, 0), (result.errors,
                                                                           service.tails())
    return result


def _per_request(result: RoundResult) -> float:
    """The same rate from the requests' own meta_info (the server's other report of it)."""
    return (sum(r["cached_tokens"] for r in result.records)
            / sum(r["prompt_tokens"] for r in result.records))


def test_a_trace_replays_and_its_hit_rate_is_the_servers(sglang: Service,
                                                         tmp_path: Path) -> None:
    result = _round(sglang, tmp_path, "replay")
    assert result.output_tokens == result.output_tokens_nominal == 355  # each its own length
    assert result.hit_rate_source == "server counters"
    assert result.hit_rate_implied == pytest.approx(0.3751, abs=1e-4)
    assert result.hit_rate_achieved is not None
    # the counters' deltas are this round's requests alone (not the warm-up's), as the
    # requests themselves report them
    assert result.hit_rate_achieved == pytest.approx(_per_request(result), abs=1e-9)
    assert abs(result.hit_rate_achieved - result.hit_rate_implied) <= 0.05, (
        result.hit_rate_achieved, result.hit_rate_implied)
    assert result_problems(result) == []


def test_a_shared_prefix_round_achieves_its_stated_share(sglang: Service,
                                                         tmp_path: Path) -> None:
    result = _round(sglang, tmp_path, "shared")
    assert result.hit_rate_source == "server counters"
    assert result.hit_rate_implied == pytest.approx(7 * 192 / (10 * 256))
    assert result.hit_rate_achieved == pytest.approx(_per_request(result), abs=1e-9)
    assert abs(result.hit_rate_achieved - result.hit_rate_implied) <= 0.05, (
        result.hit_rate_achieved, result.hit_rate_implied)
    assert result_problems(result) == []
