"""Every benchmark under benchmarks/ runs in its smoke mode (``--smoke``: the same code path with
the smallest parameters) and ends with its figures in the one format of benchmarks/benchkit/
results.py (``RESULT <figure>: <value> | goal <goal> | ok``). Its figures mean nothing here; a
benchmark that crashes, or prints no goal line, fails.

A benchmark is listed in :data:`SMOKES` with what it needs; a ``benchmarks/bench_*.py`` that is
not listed fails :func:`test_every_benchmark_is_listed`. Adding one is one line::

    "bench_new": Smoke(),                             # needs nothing beyond this checkout
    "bench_new": Smoke(needs=("sglang",)),            # the SGLang venv (fixture sglang_cpu)
    "bench_new": Smoke(needs=("hosts",), args=(...)), # the namespace test hosts (test_hosts)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from benchkit.results import Result, goal, info, parse_results
from support.paths import REPO

BENCHMARKS = REPO / "benchmarks"
TIMEOUT_S = 240.0  # the smoke modes take 5-40 s each on 2 busy cores


@dataclass(frozen=True)
class Smoke:
    """How one benchmark's smoke mode runs: the shared things it needs (keys of :data:`NEEDS`)
    and its arguments beyond ``--smoke``."""

    needs: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


SMOKES: dict[str, Smoke] = {
    "bench_chaos": Smoke(),
    "bench_client_capacity": Smoke(needs=("sglang",)),
    "bench_client_fidelity": Smoke(needs=("sglang",)),
    "bench_fail_fast": Smoke(),
    "bench_gate": Smoke(),
    "bench_interrupts": Smoke(),
    "bench_orchestration": Smoke(),
    "bench_planner": Smoke(),
    "bench_report_speed": Smoke(),
    "bench_sim_stream_latency": Smoke(),
    "bench_xdist_pool": Smoke(),
}


def _sglang(request: pytest.FixtureRequest, env: dict[str, str]) -> None:
    """The provisioned SGLang venv and tiny models, as benchmarks/benchkit/provisioned.py
    reads them."""
    prov = request.getfixturevalue("sglang_cpu")
    env["PPSWEEP_SGLANG_PYTHON"] = prov.python
    for name, path in prov.models.items():
        env["PPSWEEP_MODEL_" + name.upper().replace("-", "_")] = path


def _hosts(request: pytest.FixtureRequest, env: dict[str, str]) -> None:
    """The namespace test hosts, up for the whole session: the benchmark must not tear them
    down."""
    request.getfixturevalue("test_hosts")
    env["PPSWEEP_KEEP_TEST_HOSTS"] = "1"


NEEDS: dict[str, Callable[[pytest.FixtureRequest, dict[str, str]], None]] = {
    "sglang": _sglang,
    "hosts": _hosts,
}


def test_every_benchmark_is_listed() -> None:
    files = {p.stem for p in BENCHMARKS.glob("bench_*.py")}
    assert sorted(files - set(SMOKES)) == [], (
        "benchmarks without a smoke run: give each a --smoke mode and a line in SMOKES")
    assert sorted(set(SMOKES) - files) == [], "SMOKES lists benchmarks that do not exist"
    unknown = {n: s.needs for n, s in SMOKES.items() if set(s.needs) - set(NEEDS)}
    assert unknown == {}, f"needs must be among {sorted(NEEDS)}"


def test_result_lines_read_back() -> None:
    figures = [goal("false alarms", "2/80 points (2.5%)", "<= 5 %", True),
               goal("ratio", "1.08", "<= 1.03", False), info("load average", "0.4 → 2.8")]
    text = "noise\n" + "\n".join(f.line() for f in figures) + "\n"
    assert parse_results(text) == figures
    assert text.splitlines()[-2] == "RESULT ratio: 1.08 | goal <= 1.03 | not ok"
    assert parse_results("RESULT x: 1 | goal <= 2 | maybe\n") == []
    with pytest.raises(ValueError, match=re.escape("no '|'")):
        Result("a|b", "1").line()


@pytest.mark.parametrize("name", sorted(SMOKES))
def test_benchmark_smoke(name: str, request: pytest.FixtureRequest) -> None:
    smoke = SMOKES[name]
    env = dict(os.environ)
    for need in smoke.needs:
        NEEDS[need](request, env)
    cmd = [sys.executable, str(BENCHMARKS / f"{name}.py"), "--smoke", *smoke.args]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    out = done.stdout
    tail = f"{' '.join(cmd)} exited {done.returncode}:\n{out[-4000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, tail
    figures = parse_results(out)
    assert [f for f in figures if f.goal is not None], "no goal line (RESULT … | goal …):\n" + tail
    last = [line for line in out.splitlines() if line.strip()][-len(figures):]
    assert last == [f.line() for f in figures], "the RESULT lines must end the output:\n" + tail
