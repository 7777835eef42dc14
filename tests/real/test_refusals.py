"""The emulator refuses launch arguments as real SGLang 0.5.23 does (issue 38, point 3).

Real SGLang's argument checks run before any model loads: one interpreter of the provisioned
CPU venv parses each case like ``launch_server`` (``prepare_server_args``, ``resolve_once``,
``check_server_args``) and prints the exception line; the emulator's ``check_args`` gets the
same arguments. Every case real SGLang refuses, the emulator refuses with the same line; a case
real SGLang lets pass is refused only where the emulator says so (EMULATOR_ONLY), and a layout
that uses part of each node is accepted by both. One interpreter start (~5 s), no boot.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from support.real import ProvisionImpossible, provision

from pytest_ppsweep.sim.launch.config import LaunchError, check_args
from pytest_ppsweep.sim.launch.serverargs import parse_args

pytestmark = pytest.mark.slow

ADDR = ("--dist-init-addr", "127.0.9.1:39990")
CASES: dict[str, tuple[str, ...]] = {
    "tp not divisible by nodes": ("--tp-size", "3", "--nnodes", "2", *ADDR),
    "dp across nodes": ("--tp-size", "2", "--dp-size", "2", "--nnodes", "2", *ADDR),
    "pp micro batch 0": ("--pp-size", "2", "--pp-max-micro-batch-size", "0"),
    "chunk not a page multiple": ("--chunked-prefill-size", "100", "--page-size", "64"),
    "tp4 pp2 on 2 nodes": ("--tp-size", "4", "--pp-size", "2", "--nnodes", "2", *ADDR),
    "pp2 on 2 nodes": ("--pp-size", "2", "--nnodes", "2", *ADDR),
}
# Refused by the emulator's check_args only: real SGLang 0.5.23 passes check_server_args and
# fails later in the launch (not modelled: sim/launch/config.py says so at each check).
EMULATOR_ONLY: dict[str, tuple[str, ...]] = {
    "node rank past nnodes": ("--tp-size", "2", "--nnodes", "2", "--node-rank", "2", *ADDR),
    "nnodes without dist-init-addr": ("--nnodes", "2", "--tp-size", "2"),
}

PROBE = """
import json, sys
from sglang.srt.server_args import prepare_server_args
out = {}
for name, argv in json.loads(sys.argv[1]).items():
    try:
        args = prepare_server_args(argv)
        args.resolve_once()
        args.check_server_args()
        out[name] = None
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
print("PPSWEEP_REFUSALS=" + json.dumps(out))
"""


def _emulator(argv: list[str]) -> str | None:
    try:
        check_args(parse_args(argv))
    except LaunchError as exc:
        return exc.text.splitlines()[-1]
    return None


@pytest.fixture(scope="module")
def real() -> dict[str, str | None]:
    try:
        prov = provision()
    except ProvisionImpossible as exc:
        pytest.skip(f"cannot provision real SGLang here: {exc}")
    model = prov.models["tiny-llama-h4"]
    cases = {k: ["--model-path", model, "--device", "cpu", *v]
             for k, v in (CASES | EMULATOR_ONLY).items()}  # fmt: skip
    env = {**os.environ, "SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([prov.python, "-c", PROBE, json.dumps(cases)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)  # fmt: skip
    line = [x for x in proc.stdout.splitlines() if x.startswith("PPSWEEP_REFUSALS=")]
    assert line, f"probe failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    out: dict[str, str | None] = json.loads(line[0].split("=", 1)[1])
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_the_emulator_refuses_what_sglang_refuses(real: dict[str, str | None], name: str) -> None:
    assert _emulator(["--model-path", "m", *CASES[name]]) == real[name]


@pytest.mark.parametrize("name", list(EMULATOR_ONLY))
def test_the_emulator_only_refusals_are_known(real: dict[str, str | None], name: str) -> None:
    assert real[name] is None, f"SGLang now refuses {name!r}: compare the wording"
    assert _emulator(["--model-path", "m", *EMULATOR_ONLY[name]]) is not None
