"""No secret in any artifact: an emulator run with known secrets planted everywhere a sweep can
hold one, then every file of the run folder, the JUnit XML, the HTML report and pytest's output
are scanned for them (support.secrets). Layout pp2 boots and measures; pp1 carries api_key and
ssl_keyfile_password flags (both pass the flag check: the emulator accepts them, as SGLang does),
and what its path writes (launch lines, server info, any failure's log tails) is scanned too.

What is not exercised: the sudo password is only read on ssh clusters (a local cluster here:
its file's path is in the sweep, its content must not be anywhere); the SSH key likewise."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support.matrices import emulated_cluster
from support.paths import ACCEPTANCE
from support.processes import sim_processes
from support.secrets import planted, scan

HITS: list[str] = []
SCANNED: dict[str, Any] = {}


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def matrix(tmp: Path, port: int) -> tuple[str, object]:
    p = planted(tmp / "secrets")
    cluster = emulated_cluster("local", "127.0.64", port, port + 5000, 2000, tmp / "state",
                               nodes=2)
    # the secrets in every quoting style TOML has: basic, literal, multi-line, inline tables
    cluster = cluster.replace(
        "env = {", f"sudo_password_file = {_toml_string(str(p.sudo_password_file))}\n"
        f"ssh_key = {_toml_string(str(p.ssh_key_file))}\n"
        f"env = {{ X_PASSWORD = {_toml_string(p.env['X_PASSWORD'])},")
    text = f'''
[sweep]
name = "secrets"
model_path = "/data/hf_models/Kimi-K3"
ep_cap = 4
boot_timeout_s = 60
baseline = "pp2"

[server]
chunked_prefill_size = 8192
admin_api_key = {_toml_string(p.server["admin_api_key"])}

[env]
HF_TOKEN = {_toml_string(p.env["HF_TOKEN"])}
FOO_API_KEY = '{p.env["FOO_API_KEY"]}'
SSH_PRIVATE_KEY = """
{p.env["SSH_PRIVATE_KEY"]}"""

[[configs]]
pp = 2
tp = 8
env = {{ Y_SECRET = {_toml_string(p.env["Y_SECRET"])} }}

[[configs]]
pp = 1
tp = 16
server = {{ api_key = {_toml_string(p.server["api_key"])}, ssl_keyfile_password = {
    _toml_string(p.server["ssl_keyfile_password"])} }}

[workload]
input_len = 1024
output_len = 1
concurrency = [2]
num_requests = 4
repeats = 1
vocab_size = 1000
''' + cluster
    return text, p


@pytest.mark.slow
def test_emulator_run_leaves_no_secret_anywhere(pytester: pytest.Pytester, tmp_path: Path
                                                ) -> None:
    port = 32400 + (os.getpid() % 100) * 4
    text, plant = matrix(tmp_path, port)
    folder = pytester.path / "sweep"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(text)
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    reports, junit = tmp_path / "reports", tmp_path / "junit.xml"
    try:
        result = pytester.runpytest_subprocess(
            str(folder), "-v", "-rA", "--ppsweep-reports", str(reports), f"--junitxml={junit}",
            timeout=400)
    finally:
        left = sim_processes(f"--port {port}")
    assert not left, f"emulator ranks left behind: {left}"
    out = result.stdout.str() + result.stderr.str()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), out
    assert "test_prefill[pp2-tp8-ep4-c2] PASSED" in out, out
    html = list(reports.rglob("report.html"))
    assert html and junit.exists()
    hits = scan([reports, junit], [result.stdout.str(), result.stderr.str()], plant)
    SCANNED.update(files=sum(1 for p in reports.rglob("*") if p.is_file()) + 1, outputs=2,
                   secrets=list(plant.values()))
    HITS[:] = [str(h) for h in hits]
    assert not hits, "\n".join(str(h) for h in hits)
