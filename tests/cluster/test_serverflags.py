"""Server flags, ``[axes]`` keys and enumerated values checked against node 0's own parser
during preflight (here the emulator's parser; tests/real/test_real_serverflags.py reads real
SGLang's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.matrices import one_node_matrix

from pytest_ppsweep.cluster import preflight, serverflags
from pytest_ppsweep.matrix.parse import load

# A sweep on one loopback node running the emulator, with a typo'd [server] flag, an axis over a
# misspelt flag and an axis value outside the parser's choices.
MISTAKES = """
[server]
chunked_prefil_size = 8192
moe_runner_backend = "flashinfer_mxfp4"

[axes]
moe_a2a_backend = ["none", "deeep"]
pp_max_micro_bach_size = [1, 2]
"""


def _sweep(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "ppsweep.toml"
    text = one_node_matrix("flags", "pytest_ppsweep.sim", 39471, 39472)
    path.write_text(text.replace("[[configs]]", extra + "\n[[configs]]", 1))
    return path


def read_flags(python: str, module: str, env: dict[str, str] | None = None
               ) -> serverflags.ServerFlags | None:
    """What preflight's module check on node 0 reads: ARGS_SCRIPT run by ``python``."""
    done = subprocess.run([python, "-c", serverflags.ARGS_SCRIPT, module], capture_output=True,
                          text=True, timeout=180, check=False,
                          env={**os.environ, **(env or {})})
    assert done.returncode in (serverflags.DUMPED, serverflags.NO_PARSER), done.stderr
    return serverflags.parse_dump(module, done.stdout)


@pytest.fixture(scope="module")
def emulator_flags() -> serverflags.ServerFlags:
    flags = read_flags(sys.executable, "pytest_ppsweep.sim")
    assert flags is not None, "the emulator's parser was not read"
    return flags


def test_the_emulators_parser_is_read(emulator_flags: serverflags.ServerFlags) -> None:
    assert {"--chunked-prefill-size", "--moe-a2a-backend", "--model-path"} <= emulator_flags.options
    assert "deepep" in emulator_flags.choices["--moe-a2a-backend"]
    assert emulator_flags.takes_value["--disable-radix-cache"] is False


def test_preflight_names_each_mistake_with_file_key_and_a_near_name(tmp_path: Path) -> None:
    path = _sweep(tmp_path, MISTAKES)
    sweep = load(path)  # the file itself is valid: only the server's parser knows the flags
    problems = preflight.check(sweep, sweep.cluster("one"))
    text = "\n".join(problems)
    assert len(problems) == 3, text
    assert (f"{path}: key 'server.chunked_prefil_size': expected a flag of pytest_ppsweep.sim "
            f"(did you mean 'chunked_prefill_size'?), found --chunked-prefil-size") in text
    assert "key 'axes.pp_max_micro_bach_size'" in text
    assert "did you mean 'pp_max_micro_batch_size'?" in text
    assert "key 'axes.moe_a2a_backend': expected one of 'none', 'deepep'" in text
    assert "(did you mean 'deepep'?), found 'deeep'" in text
    assert all(p.startswith("127.0.0.1 (127.0.0.1): ") for p in problems)


def test_a_correct_sweep_passes_and_a_module_without_a_parser_is_not_refused(
    tmp_path: Path, emulator_flags: serverflags.ServerFlags
) -> None:
    sweep = load(_sweep(tmp_path, "[server]\nchunked_prefill_size = 8192\n"))
    assert serverflags.check(sweep, emulator_flags) == []
    assert serverflags.parse_dump("m", "no dump here\n") is None


def test_the_parser_dump_of_a_stand_in_server(tmp_path: Path) -> None:
    """Any argparse server: the first parser with long options is dumped, nothing runs."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "stub_server.py").write_text(
        "import argparse, sys\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--model-path'); p.add_argument('--port', type=int)\n"
        "p.add_argument('--attention_backend', choices=['fa3', 'triton'])\n"
        "p.parse_args()\n"
        "sys.exit('started: the dump did not stop it')\n"
    )
    path = tmp_path / "ppsweep.toml"
    path.write_text(one_node_matrix("stub", "stub_server", 39473, 39474, site).replace(
        "[[configs]]", '[server]\nattention_backend = "fa4"\n\n[[configs]]', 1))
    sweep = load(path)
    flags = read_flags(sys.executable, "stub_server", {"PYTHONPATH": str(site)})
    assert flags is not None and "--attention-backend" in flags.options
    assert serverflags.check(sweep, flags) == [
        f"{path}: key 'server.attention_backend': expected one of 'fa3', 'triton' (stub_server "
        f"--attention-backend) (did you mean 'fa3'?), found 'fa4'"]
    # and preflight reads it the same way from node 0, in the ranks' environment
    assert preflight.check(sweep, sweep.cluster("one")) == [
        f"127.0.0.1 (127.0.0.1): {p}" for p in serverflags.check(sweep, flags)]
