"""Every command the README shows is run here, as a user would run it: from the repository root,
on the shipped sweep files, the provisioned engine and the default paths.

Long ones run on a cut-down workload through the same file and code path: the plugin's own
``--ppsweep-requests``/``--ppsweep-repeats`` (and ``--ppsweep-time-scale`` on the emulator) and a
reports folder of the test's. A command added to the README without a way to run it here fails
:func:`test_every_readme_command_is_run_by_the_suite`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO
from support.real import ProvisionImpossible, provision

README = REPO / "README.md"
PREFIXES = ("pytest ", "bash scripts/", "python -m pytest_ppsweep", "python benchmarks/")

# On the emulator: fewer, shorter rounds, and emulated time 4x faster than the default; rounds
# that short are noisy on a busy machine, so their spread is a warning (an exploratory run).
EMULATED_CUT = ("--ppsweep-requests", "8", "--ppsweep-repeats", "2", "--ppsweep-time-scale", "400",
                "--ppsweep-spread-rule", "warn")
REAL_CUT = ("--ppsweep-requests", "4", "--ppsweep-repeats", "1", "--ppsweep-config", "pp2-tp2",
            "--ppsweep-spread-rule", "warn")

# Shown in the README but not run here, and why.
NOT_RUN = {
    "bash scripts/test.sh": "it is this suite (CI runs it as .ci/run)",
    "pytest tests": "it is this suite (the last step of scripts/test.sh)",
    "pytest test_matrix --ppsweep-cluster pro6000 --ppsweep-image local/sglang:new-image":
        "hosts 601-604 are the users' cluster, not reachable from here; tests/remote runs the "
        "same ssh + docker path on namespace hosts",
    "python benchmarks/bench_xdist_pool.py": "a benchmark (minutes of sweeps); "
        "tests/plugin/test_xdist_pool.py runs its -n 2 path",
    "python benchmarks/bench_gate.py": "a benchmark (17 emulated sweeps, minutes); "
        "tests/gate/test_gate.py checks the tiers and tests/plugin/test_gate_e2e.py the gate",
    "python benchmarks/bench_fail_fast.py": "a benchmark (boots real SGLang on CPU, minutes); "
        "tests/plugin/test_liveness.py and tests/real/test_real_sglang.py run its paths",
    "python benchmarks/bench_chaos.py": "a benchmark (the whole chaos matrix, ~50 boots on four "
        "backends, minutes; root for the namespace hosts); tests/reliability/test_chaos.py and "
        "tests/remote/test_chaos_remote.py run a subset that takes every fault and backend once",
}


def readme_commands(text: str) -> list[str]:
    """Command lines of the README: the lines of ```bash blocks (comments dropped) and inline
    code spans that start like a command."""
    found: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                found.append(line)
    for span in re.findall(r"`([^`\n]+)`", text):
        if span.startswith(PREFIXES):
            found.append(span.strip())
    return list(dict.fromkeys(c for c in found if c.startswith(PREFIXES)))


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return done


def _pytest(command: str, *extra: str) -> list[str]:
    assert command.startswith("pytest ")
    return [sys.executable, "-m", "pytest", *shlex.split(command)[1:], "-p", "no:cacheprovider",
            *extra]


def _ok(done: subprocess.CompletedProcess[str], command: str, codes: tuple[int, ...] = (0,)
        ) -> str:
    out = done.stdout + done.stderr
    assert done.returncode in codes, f"{command}: exit {done.returncode}\n{out[-4000:]}"
    assert "Traceback (most recent call last)" not in out or done.returncode != 0, out[-4000:]
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme-reports")


def _runs(reports: Path) -> list[Path]:
    return sorted((p for p in reports.iterdir() if (p / "results.csv").is_file()),
                  key=lambda p: p.stat().st_mtime)


def test_every_readme_command_is_run_by_the_suite() -> None:
    commands = set(readme_commands(README.read_text(encoding="utf-8")))
    assert commands, "no command found in README.md"
    covered = set(RUNS) | set(NOT_RUN)
    assert commands - covered == set(), "README commands without a test here"
    assert covered - commands == set(), "commands tested here that the README no longer shows"


def test_the_parser_finds_blocks_and_inline_commands() -> None:
    text = "x\n```bash\n# note\npytest a   # why\nbash scripts/b.sh\n```\nrun `pytest c` or `ls`"
    assert readme_commands(text) == ["pytest a", "bash scripts/b.sh", "pytest c"]


# -- the commands, grouped as a user would run them one after the other ------------------------

RUNS: dict[str, str] = {}


def runs(*commands: str) -> pytest.MarkDecorator:
    """Register the README commands a test runs (checked against the README above)."""
    for command in commands:
        RUNS[command] = ""
    return pytest.mark.slow



@runs("bash scripts/sweep.sh", "bash scripts/sweep.sh -k pp8")
def test_command_1_installs_and_runs_the_sweep(reports: Path) -> None:
    out = _ok(_run(["bash", "scripts/sweep.sh", "-k", "pp8", "--ppsweep-reports", str(reports),
                    "-p", "no:cacheprovider", *EMULATED_CUT], timeout=600), "sweep.sh -k pp8")
    assert "ppsweep summary" in out and "report: " in out
    assert re.search(r"\b\d+ passed\b", out)


@runs(
    "pytest test_matrix --ppsweep-save-baseline gold",
    "pytest test_matrix --ppsweep-compare gold --ppsweep-threshold input_tps:-3% "
    "--ppsweep-threshold ttft_p50:+5%",
    "pytest test_matrix --ppsweep-image local/sglang:new --ppsweep-compare reports/<last-good-run>",
    "python -m pytest_ppsweep report reports/<run_id>",
    "python -m pytest_ppsweep compare reports/<a> reports/<b>",
    "python -m pytest_ppsweep runs [--reports DIR]",
    "python -m pytest_ppsweep show RUN [--reports DIR]",
    "python -m pytest_ppsweep --help",
)
def test_gating_a_new_image_and_rebuilding_reports(reports: Path) -> None:
    cut = ("--ppsweep-reports", str(reports), *EMULATED_CUT)
    save = "pytest test_matrix --ppsweep-save-baseline gold"
    out = _ok(_run(_pytest(save, *cut), timeout=600), save)
    assert "baseline 'gold' saved" in out
    assert (reports / "baselines" / "gold").is_dir()
    gold = _runs(reports)[-1]

    # A gate may find a regression on a cut-down emulated run (exit 1); it must have compared.
    compare = ("pytest test_matrix --ppsweep-compare gold --ppsweep-threshold input_tps:-3% "
               "--ppsweep-threshold ttft_p50:+5%")
    out = _ok(_run(_pytest(compare, *cut), timeout=600), compare, codes=(0, 1))
    assert "ppsweep gate vs" in out
    image = ("pytest test_matrix --ppsweep-image local/sglang:new --ppsweep-compare "
             f"{gold}")
    out = _ok(_run(_pytest(image, *cut), timeout=600), image, codes=(0, 1))
    assert "ppsweep gate vs" in out and (_runs(reports)[-1] / "gate.csv").is_file()

    latest = _runs(reports)[-1]
    report = [sys.executable, "-m", "pytest_ppsweep", "report", str(latest)]
    out = _ok(_run(report, timeout=120), "python -m pytest_ppsweep report")
    assert (latest / "report-rebuilt.html").is_file() and "report: " in out
    compare_runs = [sys.executable, "-m", "pytest_ppsweep", "compare", str(gold), str(latest)]
    out = _ok(_run(compare_runs, timeout=120), "python -m pytest_ppsweep compare")
    assert (latest / f"compare-{gold.name}.csv").is_file()

    cli = [sys.executable, "-m", "pytest_ppsweep"]
    out = _ok(_run([*cli, "runs", "--reports", str(reports)], timeout=120), "runs")
    assert gold.name in out and latest.name in out
    out = _ok(_run([*cli, "show", gold.name, "--reports", str(reports)], timeout=120), "show")
    assert f"ppsweep summary: {gold.name}" in out
    out = _ok(_run([*cli, "--help"], timeout=60), "--help")
    assert all(verb in out for verb in ("report", "compare", "runs", "show"))


@runs(
    "pytest test_matrix -k pp8",
    'pytest test_matrix -k "pp8 and c16"',
    "pytest test_matrix --ppsweep-config pp1",
    "pytest test_matrix --ppsweep-config pp4,pp8",
    "pytest test_matrix -k pp8 --ppsweep-baseline-from <run>",
)
def test_selecting_configurations(reports: Path) -> None:
    expected = {
        "pytest test_matrix -k pp8": {"pp8-tp4-ep4"},
        'pytest test_matrix -k "pp8 and c16"': {"pp8-tp4-ep4"},
        "pytest test_matrix --ppsweep-config pp1": {"pp1-tp32-ep4"},
        "pytest test_matrix --ppsweep-config pp4,pp8": {"pp4-tp8-ep4", "pp8-tp4-ep4"},
    }
    for command, layouts in expected.items():
        before = set(_runs(reports))
        out = _ok(_run(_pytest(command, "--ppsweep-reports", str(reports), *EMULATED_CUT),
                       timeout=600), command)
        new = set(_runs(reports)) - before
        assert len(new) == 1, out[-2000:]
        booted = {line.split(",")[0] for line in
                  (new.pop() / "configs.csv").read_text().splitlines()[1:]}
        assert booted == layouts, f"{command}: booted {booted}\n{out[-2000:]}"
        if command == "pytest test_matrix -k pp8":
            assert "INVALID: no configs.csv row" not in out  # deselected layouts not judged

    full = next(r for r in _runs(reports) if len((r / "configs.csv").read_text().splitlines()) > 5)
    command = f"pytest test_matrix -k pp8 --ppsweep-baseline-from {full.name}"
    out = _ok(_run(_pytest(command, "--ppsweep-reports", str(reports), *EMULATED_CUT),
                   timeout=600), command)
    assert f"baseline pp1-tp32-ep4 from run {full.name}" in out, out[-3000:]


@runs("pytest test_matrix --ppsweep-cluster local,local-b -n auto")
def test_several_clusters_at_once(reports: Path) -> None:
    command = "pytest test_matrix --ppsweep-cluster local,local-b -n auto"
    out = _ok(_run(_pytest(command, "--ppsweep-reports", str(reports), *EMULATED_CUT),
                   timeout=600), command)
    assert "2 workers" in out
    assert "ppsweep summary" in out


@runs("bash scripts/provision_sglang_cpu.sh",
      "pytest test_matrix --ppsweep-matrix test_matrix/cpu.toml")
def test_real_sglang_on_cpu(reports: Path) -> None:
    try:
        provision()  # bash scripts/provision_sglang_cpu.sh, from the repository root
    except ProvisionImpossible as exc:
        pytest.skip(f"real SGLang cannot be provisioned here: {exc}")
    command = "pytest test_matrix --ppsweep-matrix test_matrix/cpu.toml"
    out = _ok(_run(_pytest(command, "--ppsweep-reports", str(reports), *REAL_CUT),
                   timeout=900), command)
    assert "ppsweep summary" in out
    assert "SIMULATED" not in out
