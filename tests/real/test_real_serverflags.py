"""Real SGLang 0.5.23's own argument list, read by preflight from node 0's
``sglang.launch_server`` (its argparse parser), catches a misspelt flag and an axis value
outside SGLang's choices before anything boots."""

from __future__ import annotations

from pathlib import Path

from support.real import Provisioned, sweep_toml

from pytest_ppsweep.cluster import preflight
from pytest_ppsweep.matrix.parse import load


def test_real_sglang_flags_catch_typos_before_boot(tmp_path: Path, sglang_cpu: Provisioned) -> None:
    text = sweep_toml(sglang_cpu, port=34991, dist_port=35991, mark="flags")
    text = text.replace("[server]\n", "[server]\nchunked_prefil_size = 8192\n", 1)
    text = text.replace("[workload]", '[axes]\nmoe_a2a_backend = ["none", "deeep"]\n'
                        'moe_runner_backend = ["auto", "flashinfer_mxfp4"]\n\n[workload]', 1)
    path = tmp_path / "ppsweep.toml"
    path.write_text(text)
    sweep = load(path)  # valid as a file: only SGLang's parser knows its flags
    problems = preflight.check(sweep, sweep.cluster("cpu"))
    node0 = "127.0.6.1 (127.0.6.1): "
    assert problems == [
        f"{node0}{path}: key 'server.chunked_prefil_size': expected a flag of "
        f"sglang.launch_server (did you mean 'chunked_prefill_size'?), found "
        f"--chunked-prefil-size, which its argument parser does not accept",
        next(p for p in problems if "'axes.moe_a2a_backend'" in p),
    ], problems
    # SGLang 0.5.23's own choices (the emulator's list has the same names, not the same source)
    a2a = problems[1]
    assert a2a.startswith(f"{node0}{path}: key 'axes.moe_a2a_backend': expected one of 'none', "
                          f"'deepep'"), a2a
    assert "(sglang.launch_server --moe-a2a-backend) (did you mean 'deepep'?), found 'deeep'" in a2a
