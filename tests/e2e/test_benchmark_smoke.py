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

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from benchkit.results import Result, goal, info, parse_results
from support.paths import REPO

BENCHMARKS = REPO / "benchmarks"
TIMEOUT_S = 240.0  # the smoke modes take 5-40 s each on 2 busy cores


@dataclass(frozen=True)
class Smoke:
    """How one benchmark's smoke mode runs: the shared things it needs (keys of :data:`NEEDS`),
    its arguments beyond ``--smoke`` and lines its output must hold (regexes, multiline)."""

    needs: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    expect: tuple[str, ...] = ()
    all_ok: bool = False  # every goal must be met even in the smoke run (a bound that can fail)


# bench_orchestration: the work, both ratios and where the rest of the wall time goes
ORCHESTRATION = (
    r"work: boot +[\d.]*[1-9][\d.]* s \+ rounds +[\d.]*[1-9][\d.]* s",  # both > 0
    r"sweep +\(first layout step → last\) +[\d.]+ s +ratio \d\.\d{3} +\(goal",
    r"command \(pytest start → exit\) +[\d.]+ s +ratio \d\.\d{3}",
    *(rf"^    {phase} +-?[\d.]+$" for phase in ("launch", "warm-up", "flush", "snapshots",
                                                "log scan", "teardown", "between",
                                                "pytest start", "report and exit")),
)
# bench_planner: every figure against its goal
PLANNER = tuple(f"^RESULT {figure}" for figure in (
    "seeds LOO MAPE input_tps@c8", "seeds LOO MAPE ttft_p50_s@c16", "cluster time used",
    "chosen within 3 % of the true best", "hidden profiles 90 % interval coverage"))


SMOKES: dict[str, Smoke] = {
    "bench_chaos": Smoke(),
    "bench_client_capacity": Smoke(needs=("sglang",)),
    "bench_client_fidelity": Smoke(needs=("sglang",)),
    "bench_correctness_probe": Smoke(),
    "bench_decisions": Smoke(),
    "bench_fail_fast": Smoke(),
    "bench_gate": Smoke(),
    "bench_interrupts": Smoke(),
    # CI's short long sweep (issue 29): threads, open files and RSS must stay flat per layout
    "bench_long_sweep": Smoke(args=("--port", "44640", "--net", "127.0.45"), all_ok=True),
    "bench_orchestration": Smoke(expect=ORCHESTRATION),
    "bench_planner": Smoke(expect=PLANNER),
    "bench_report_speed": Smoke(),
    "bench_sim_seeds": Smoke(),
    "bench_slurm_allocation": Smoke(needs=("slurm",)),
    # issue 37: the decision rule's stated error rates; the issue's own cases hold in any run
    "bench_statistics": Smoke(expect=(
        r"^RESULT A/A false decisions, 6 C, 8 repeats", r"^RESULT power, gap 2 %, sigma 1 %",
        r"^RESULT one repeat against two .*\| goal not decided \| ok$",
        r"^RESULT a wide point against a steady one .*\| goal not decided \| ok$")),
    "bench_sim_stream_latency": Smoke(),
    "bench_slo_capacity": Smoke(expect=(
        r"^RESULT true capacity, TTFT p50 ≤ 5 s", r"^RESULT low end at or below the truth, 40",
        r'^RESULT probe size of requests = "auto" \(measure/probesize.py\): (\d+) requests: M/D/1',
        r'^RESULT capacity within 10 % of the truth, "auto" \(40 then \d+\) requests a probe: .* '
        r"\| goal >= 90%",
        r'^RESULT 95 % interval holds the truth, "auto" \(40 then \d+\) requests a probe: .* '
        r"\| goal its nominal",
        r'^RESULT cost, "auto" \(40 then \d+\) requests a probe: [\d.]+ probes \([\d.]+ refine\)',
        # the cells the method was never tuned on: other seeds, p99, a server not M/D/1
        r"^RESULT fresh seeds, TTFT p99 ≤ 12 s on a M/D/1 server \(truth [\d.]+ req/s\): 95 % "
        r"interval holds the truth in [\d.]+% of \d+ seeds",
        r"^RESULT fresh seeds, TTFT p50 ≤ 5 s on a batching server")),
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


def _slurm(request: pytest.FixtureRequest, env: dict[str, str]) -> None:
    """The test Slurm (slurmctld and one slurmd per namespace node), up for the whole session:
    the benchmark finds it running and provisions nothing."""
    request.getfixturevalue("test_slurm")


NEEDS: dict[str, Callable[[pytest.FixtureRequest, dict[str, str]], None]] = {
    "sglang": _sglang,
    "hosts": _hosts,
    "slurm": _slurm,
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


@pytest.mark.parametrize("name", [  # one that needs a shared thing runs in the machine half
    pytest.param(n, marks=[pytest.mark.machine] if SMOKES[n].needs else [])
    for n in sorted(SMOKES)])
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
    if smoke.all_ok:
        assert [f.name for f in figures if f.ok is False] == [], tail
    missing = [e for e in smoke.expect if not re.search(e, out, flags=re.M)]
    assert missing == [], tail


def _bench_figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_figures",
                                                  REPO / "tools" / "bench_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("doc", ["docs/guides/running.md", "docs/RELIABILITY.md"])
def test_quoted_figures_name_their_command_and_date(doc: str) -> None:
    tool = _bench_figures()
    text = (REPO / doc).read_text(encoding="utf-8")
    commands = tool.blocks(text)
    assert commands, f"{doc}: no <!-- figures: … --> block"
    for command in commands:
        bench = re.fullmatch(r"python benchmarks/(bench_\w+)\.py( .*)?", command)
        assert bench and bench[1] in SMOKES, f"{doc}: block of an unknown command {command!r}"
        body = text.split(f"<!-- figures: {command} -->\n", 1)[1].split("<!-- /figures -->")[0]
        assert re.match(rf"Produced by `{re.escape(command)}` on \d{{4}}-\d\d-\d\d \d\d:\d\d UTC",
                        body), f"{doc}: {command}: no command and date:\n{body}"
        assert [r for r in parse_results(body) if r.goal is not None], body


def test_bench_figures_rewrites_a_block_from_a_saved_output(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- figures: python benchmarks/bench_x.py --runs 3 -->\nold\n"
                   "<!-- /figures -->\nafter\n", encoding="utf-8")
    saved = tmp_path / "out.txt"
    saved.write_text("noise\n\nRESULT ratio: 1.01 | goal <= 1.03 | ok\n", encoding="utf-8")
    assert _bench_figures().main([str(doc), "--only", "bench_x", "--from", str(saved),
                                  "--date", "2026-12-01T21:00:00+00:00", "--load", "load 0.3"]) == 0
    assert doc.read_text(encoding="utf-8") == (
        "intro\n<!-- figures: python benchmarks/bench_x.py --runs 3 -->\n"
        "Produced by `python benchmarks/bench_x.py --runs 3` on 2026-12-01 21:00 UTC (load 0.3); "
        f"regenerate with `python tools/bench_figures.py {doc} --only benchmarks/bench_x.py`.\n\n"
        "```text\nRESULT ratio: 1.01 | goal <= 1.03 | ok\n```\n<!-- /figures -->\nafter\n")
