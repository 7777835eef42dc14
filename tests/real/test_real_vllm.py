"""The plugin's whole flow on real vLLM 0.32.0 (CPU, loopback, the tiny Llama), the second engine.

The first tests read the docs' command (support.shared_fixtures.vllm_sweep:
test_matrix/vllm_cpu.toml as shipped, TP1, TP2 and PP2 booted once each); the last runs a sweep
whose boot must fail in a pytest subprocess. Each checks what the run left: test outcomes, the
run folder, the server info read from vLLM's own log and metrics, and no vLLM process in /proc.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.matrices import replace_once
from support.paths import ACCEPTANCE, REPO
from support.real import MARK_VAR, Provisioned, assert_none_left, messages, outcomes
from support.runs import rows, run_dir
from support.shared_fixtures import CpuSweep

from pytest_ppsweep.service.readiness import EVIDENCE_FILE

pytestmark = pytest.mark.slow

LAYOUTS = {"pp1-tp1-ep1": (1, 1), "pp1-tp2-ep1": (1, 2), "pp2-tp1-ep1": (2, 1)}
VLLM_TOML = REPO / "test_matrix" / "vllm_cpu.toml"
WRAPPER = "Engine core initialization failed. See root cause above"


def test_real_vllm_sweep_boots_measures_scans_and_tears_down(vllm_sweep: CpuSweep) -> None:
    """Every acceptance test passes on every layout: topology from vLLM's log, N/N rounds of
    real timing, the outputs probe, a clean log scan; nothing is left running."""
    seen, run = vllm_sweep.seen, vllm_sweep.run
    assert run is not None, vllm_sweep.out[-8000:]
    want = {}
    for cid in LAYOUTS:
        want |= {f"test_topology[{cid}]": "passed", f"test_prefill[{cid}-c2]": "passed",
                 f"test_valid[{cid}-c2]": "passed", f"test_outputs_match[{cid}]": "passed",
                 f"test_logs_clean[{cid}]": "passed",
                 f"test_gpu_memory[{cid}]": "skipped"}  # nvidia_smi = []: no GPUs
    assert seen == want, vllm_sweep.out[-8000:]
    assert vllm_sweep.done.returncode == 0, vllm_sweep.out[-8000:]

    configs = {r["config_id"]: r for r in rows(run / "configs.csv")}
    for cid, (pp, tp) in LAYOUTS.items():
        # the server info vLLM has no endpoint for: its engine's config line and /metrics
        info = json.loads((run / "metadata" / f"{cid}.server_info.json").read_text())
        assert (info["pp_size"], info["tp_size"], info["nnodes"]) == (pp, tp, 1), info
        assert info["version"] == "0.32.0" and info["kv_tokens"] > 0, info
        assert int(info["cache_config"]["num_gpu_blocks"]) > 0, info
        row = configs[cid]
        assert row["boot_ok"] == "True" and float(row["boot_s"]) > 0, row
        assert row["topology_ok"] == "True" and row["log_clean"] == "True", row
        log = (run / "service" / cid / "node0.log").read_text(errors="replace")
        assert "Application startup complete" in log and " serve " in (
            run / "service" / cid / "launch.sh").read_text()

    # Real rounds: every one N/N, real (not simulated) timing, the prompt tokens vLLM counted.
    results = rows(run / "results.csv")
    assert {(r["config_id"], r["repeat"]) for r in results} == {
        (cid, k) for cid in LAYOUTS for k in ("1", "2")}
    for r in results:
        assert r["completed"] == r["num_requests"] == "8" and r["failed"] == "0", r
        assert r["simulated"] == "False" and float(r["time_scale"]) == 1.0, r
        assert float(r["input_tps"]) > 0 and float(r["ttft_p50_s"]) > 0, r
    raw = [json.loads(x) for x in
           (run / "raw" / "pp2-tp1-ep1" / "c2-r2.jsonl").read_text().splitlines()]
    assert len(raw) == 8 and all(x["ok"] and x["prompt_tokens"] == 256 for x in raw), raw

    # The answer: a decision, or why not (equivalent / inconclusive), with its error rate.
    answers = json.loads((run / "answers.json").read_text())["answers"]
    layout = next(a for a in answers if a["kind"] == "layout")
    assert layout["status"] in ("decided", "inconclusive", "equivalent"), layout
    assert re.search(r"(α|alpha|error rate)", json.dumps(layout, ensure_ascii=False)), layout
    assert "ppsweep summary" in vllm_sweep.out and "SIMULATED" not in vllm_sweep.out
    assert not vllm_sweep.left  # teardown left nothing before pytest exited


def test_real_vllm_outputs_agree_across_layouts(vllm_sweep: CpuSweep) -> None:
    """The correctness probe on real vLLM: greedy completions with vLLM's own token ids
    (``token_id:N``) and top logprobs, stored per layout; TP2 and PP2 agree with TP1."""
    from pytest_ppsweep.results.outputs import compare_layouts, outputs_problems, read_outputs

    run = vllm_sweep.run
    assert run is not None, vllm_sweep.out[-8000:]
    stored = {cid: read_outputs(run, cid) for cid in LAYOUTS}
    for cid, outputs in stored.items():
        assert outputs is not None and len(outputs.prompts) == 4, cid
        for p in outputs.prompts:
            assert not p.error and len(p.ids) == 8 and len(p.logprobs) == 8, p
            assert all(0 <= t < 256 for t in p.ids)  # the tiny model's vocabulary
            # greedy: each token is its position's top-1
            assert all(top[0][0] == t for top, t in zip(p.top, p.ids, strict=True)), p
        assert outputs_problems(run, cid) == [], cid
    ref = stored["pp1-tp1-ep1"]
    assert ref is not None
    for cid in ("pp1-tp2-ep1", "pp2-tp1-ep1"):
        got = stored[cid]
        assert got is not None and compare_layouts(ref, got, "pp1-tp1-ep1") == [], cid


def _failing_sweep(prov: Provisioned, folder: Path, mark: str) -> Path:
    """vllm_cpu.toml cut to TP1 whose KV space cannot hold one request of the model's length:
    1 MiB (``--kv-cache-memory-bytes``, without VLLM_CPU_KVCACHE_SPACE, which would override
    it) against ``--max-model-len 4096``. vLLM finds it after loading the model."""
    text = VLLM_TOML.read_text()
    text = re.sub(r'^python = ".*"$', f"python = {json.dumps(prov.python)}", text, flags=re.M)
    text = re.sub(r'^model_path = ".*"$',
                  f"model_path = {json.dumps(prov.models['tiny-llama-h4'])}", text, flags=re.M)
    text = replace_once(text, "max_model_len = 512\n",
                        "max_model_len = 4096\nkv_cache_memory_bytes = 1048576\n")
    text = replace_once(text, 'VLLM_CPU_KVCACHE_SPACE = "1"             # GiB', "# GiB")
    text = replace_once(text, '[clusters.cpu1.env]\n',
                        f'[clusters.cpu1.env]\n{MARK_VAR} = "{mark}"\n')
    text = replace_once(text, 'cluster = "cpu2"', 'cluster = "cpu1"')
    text = replace_once(text, 'baseline = "pp1-tp2"', 'baseline = "pp1-tp1"')
    start, end = text.index("[[configs]]"), text.index("[workload]")
    text = text[:start] + "[[configs]]\npp = 1\ntp = 1\n\n" + text[end:]
    text = re.sub(r"^port = 36000$", f"port = {36100 + os.getpid() % 400}", text, flags=re.M)
    (folder / "ppsweep.toml").write_text(text)
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    return folder


def test_real_vllm_boot_failure_names_the_root_cause(
        vllm_cpu: Provisioned, tmp_path: Path, mark: str) -> None:
    """A boot whose KV space is too small fails as soon as vLLM says so, long before the boot
    timeout, and the failure names vLLM's root cause (the engine core's ValueError), not the
    API server's wrapper that ends the log; no vLLM process is left."""
    (tmp_path / "matrix").mkdir()
    folder = _failing_sweep(vllm_cpu, tmp_path / "matrix", mark)
    reports, junit = tmp_path / "reports", tmp_path / "junit.xml"
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-v", "--ppsweep-reports", str(reports),
         f"--junitxml={junit}", "-p", "no:cacheprovider"],
        cwd=folder, capture_output=True, text=True, timeout=1200, check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    took = time.monotonic() - t0
    out = done.stdout + done.stderr
    assert junit.is_file(), out[-6000:]
    seen, why = outcomes(junit), messages(junit)
    cid = "pp1-tp1-ep1"
    assert done.returncode == 1, out[-6000:]
    assert seen[f"test_topology[{cid}]"] == "error", out[-6000:]
    msg = why[f"test_topology[{cid}]"]
    assert f"{cid}: boot failed" in msg, msg[-4000:]
    cause = "ValueError: To serve at least one request with the model's max seq len (4096)"
    # the cause is named first, on the line that says why the boot failed
    first = msg[msg.index(f"{cid}: boot failed"):].splitlines()[0]
    assert cause in first and "EngineCore" in first, msg[-4000:]
    assert WRAPPER not in first, msg[-4000:]
    run = run_dir(reports)
    config = {r["config_id"]: r for r in rows(run / "configs.csv")}[cid]
    assert config["boot_ok"] == "False" and cause in config["boot_error"], config
    # fast: the plugin stops waiting when vLLM's process says why, not at boot_timeout_s
    # (600 s): within a few seconds of the cause line, by the log's clock and the plugin's
    log = (run / "service" / cid / "node0.log").read_text(errors="replace").splitlines()
    said = next(line for line in log if cause in line)
    at = re.search(r" (\d\d):(\d\d):(\d\d) \[", said)
    assert at is not None, said
    # the failure's evidence file is written when the plugin gives the boot up
    failed_at = time.gmtime((run / "service" / cid / EVIDENCE_FILE).stat().st_mtime)
    lag = (failed_at.tm_hour * 3600 + failed_at.tm_min * 60 + failed_at.tm_sec
           - (int(at[1]) * 3600 + int(at[2]) * 60 + int(at[3]))) % 86400
    assert lag < 30, (lag, said)
    assert float(config["boot_s"]) < 600 and took < 1200, (config, took)
    assert_none_left(mark)
