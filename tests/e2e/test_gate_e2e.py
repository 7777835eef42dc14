"""Gate a new image: compare with a stored run, reuse identical layouts, resume a killed run."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.outcomes import outcomes
from support.paths import REPO
from support.runs import rows

from pytest_ppsweep.cluster.reap import find_local
from pytest_ppsweep.gate.history import History

# Big enough rounds that the real-time noise at this time scale stays around a few percent.
GATE = {
    "input_len = 4096": "input_len = 16384",
    "num_requests = 6": "num_requests = 8",
    "concurrency = [2, 4]": "concurrency = [4]",
}
# The regression tests' runs take three rounds: the gate's noise (5 × the median distance of
# each run's outer rounds from its median) then survives one round slowed by a stall of the
# loaded machine, which with two rounds sets both of that run's distances.
GATE3 = {**GATE, "repeats = 2": "repeats = 3"}
# The worse image of the regression tests: twice the compute per chunk, at the slow time scale
# (reference3_slow). At 1.5x and time scale 200 a run under one busy core read Input TPS −15 %
# within a noise of 29 % (inconclusive, rightly), and its TTFT no regression at all.
SLOWER = 2.0
ONE = "\n[[configs]]\npp = 8\ntp = 4\n"
TWO = ONE + "\n[[configs]]\npp = 4\ntp = 8\n"


def slower_profile(tmp_path: Path, factor: float) -> Path:
    """The shipped profile with every chunk's compute ``factor`` times slower (a worse image)."""
    src = (REPO / "pytest_ppsweep" / "sim" / "profiles" / "kimi-k3-6000d.toml").read_text()
    line = next(x for x in src.splitlines() if x.startswith("chunk_gpu_seconds"))
    value = float(line.split("=")[1].split("#")[0])
    path = tmp_path / f"slower-{factor}.toml"
    path.write_text(src.replace(line, f"chunk_gpu_seconds = {value * factor}"))
    return path


def sweep(
    pytester: pytest.Pytester, folder: Path, reports: Path, *args: str | Path
) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        str(folder), "-v", "--ppsweep-reports", str(reports), *[str(a) for a in args],
        timeout=600,
    )


def _reference(pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path,
               edits: dict[str, str], scale: int = 200) -> tuple[Path, Path]:
    folder = sweep_dir(TWO, scale=scale, edits=edits)
    reports = tmp_path / "reports"
    result = sweep(pytester, folder, reports, "--ppsweep-run-id", "good")
    result.assert_outcomes(passed=12, deselected=2)  # no gate tests without a reference
    return folder, reports


@pytest.fixture
def reference(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> tuple[Path, Path]:
    """A passing reference run (the last good image) and its reports folder."""
    return _reference(pytester, sweep_dir, tmp_path, GATE)


@pytest.fixture
def reference3(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> tuple[Path, Path]:
    """The reference run with three rounds a point (GATE3)."""
    return _reference(pytester, sweep_dir, tmp_path, GATE3)


@pytest.fixture
def reference3_slow(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> tuple[Path, Path]:
    """GATE3 at a quarter of the time scale: each emulated second lasts 20 ms of real time, so
    a scheduling stall of a loaded machine is a quarter of the share of a round it is at 200,
    and the drift between two runs of an unchanged image stays inside a ±10 % gate."""
    return _reference(pytester, sweep_dir, tmp_path, GATE3, scale=50)


def with_profile(folder: Path, profile: Path | None = None, faults: str = "") -> None:
    toml = folder / "ppsweep.toml"
    env = "PPSWEEP_SIM_TIME_SCALE"
    extra = (f'PPSWEEP_SIM_PROFILE = "{profile}", ' if profile else "") + (
        f'PPSWEEP_SIM_FAULTS = "{faults}", ' if faults else ""
    )
    toml.write_text(toml.read_text().replace(f"{env} =", f"{extra}{env} =", 1))


def test_within_noise_passes_and_saves_a_baseline(
    pytester: pytest.Pytester, reference3_slow: tuple[Path, Path]
) -> None:
    # Three rounds a point: one round slowed by a loaded machine moves neither median (with two,
    # it moves the median halfway, and a median worse than the threshold within the noise is
    # rightly inconclusive, which fails the gate).
    folder, reports = reference3_slow
    result = sweep(pytester, folder, reports, "--ppsweep-compare", "good",
                   "--ppsweep-threshold", "input_tps:-10%", "--ppsweep-threshold", "ttft_p50:+10%",
                   "--ppsweep-save-baseline", "gold")
    assert result.ret == 0, result.stdout.str()[-4000:]
    seen = outcomes(result.stdout.str())
    assert seen["test_no_regression[pp8-tp4-ep4-c4]"] == "PASSED"
    result.stdout.fnmatch_lines(["*ppsweep gate vs*", "*baseline 'gold' saved*"])
    assert (reports / "baselines" / "gold" / "results.csv").exists()
    assert (reports / "baselines" / "gold" / "outputs" / "pp8-tp4-ep4.json").exists()
    # The stored runs are pytest-benchmark JSON its own CLI can compare.
    cur = run_dir_named(reports, exclude={"good", "baselines"}) / "benchmark.json"
    cli = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare",
         str(reports / "good" / "benchmark.json"), str(cur)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert "test_prefill[pp8-tp4-ep4-c4]" in cli.stdout


def run_dir_named(reports: Path, exclude: set[str]) -> Path:
    runs = [p for p in reports.iterdir() if p.is_dir() and p.name not in exclude]
    assert len(runs) == 1, runs
    return runs[0]


def test_a_slower_image_fails_the_gate_on_tps_and_on_ttft(
    pytester: pytest.Pytester, reference3_slow: tuple[Path, Path], tmp_path: Path
) -> None:
    # One run of the slower image against both thresholds: each metric's own line says
    # regression, and the benchmark itself passes (the new image works, only slower).
    folder, reports = reference3_slow
    with_profile(folder, slower_profile(tmp_path, SLOWER))
    result = sweep(pytester, folder, reports, "--ppsweep-compare", reports / "good",
                   "--ppsweep-threshold", "input_tps:-5%", "--ppsweep-threshold", "ttft_p50:+5%",
                   "--ppsweep-image", "local/sglang:new")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-5000:]
    seen = outcomes(result.stdout.str())
    assert seen["test_no_regression[pp8-tp4-ep4-c4]"] == "FAILED"
    assert seen["test_prefill[pp8-tp4-ep4-c4]"] == "PASSED"
    result.stdout.fnmatch_lines(
        ["*pp8-tp4-ep4 C=4: Input TPS * vs * (?*threshold ?5 %*regression*"])
    result.stdout.fnmatch_lines(
        ["*pp8-tp4-ep4 C=4: TTFT p50 * vs * (+*threshold +5 %*regression*"])


def test_broken_new_image_fails_the_gate(
    pytester: pytest.Pytester, reference: tuple[Path, Path]
) -> None:
    folder, reports = reference
    with_profile(folder, faults="oom_load")
    result = sweep(pytester, folder, reports, "--ppsweep-compare", "good")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    seen = outcomes(result.stdout.str())
    assert seen["test_no_regression[pp8-tp4-ep4-c4]"] == "FAILED"
    result.stdout.fnmatch_lines(["*pp8-tp4-ep4*did not boot in the current run*broken*"])


def test_corrupted_image_fails_the_gate_on_correctness_alone(
    pytester: pytest.Pytester, reference3: tuple[Path, Path]
) -> None:
    """Every layout of the new image computes wrong tokens (stage 0 corrupted, sim faults): the
    layouts agree with each other, as fast as before, but not with the reference run. The speed
    thresholds are wide (a busy machine's emulated times may drift beyond the defaults between
    the two runs, and three rounds a point keep one stalled round out of the medians): only the
    outputs can fail this gate."""
    folder, reports = reference3
    with_profile(folder, faults="corrupt_stage=0")
    result = sweep(pytester, folder, reports, "--ppsweep-compare", "good",
                   "--ppsweep-threshold", "input_tps:-50%", "--ppsweep-threshold",
                   "ttft_p50:+200%")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    seen = outcomes(result.stdout.str())
    failed = sorted(t for t, o in seen.items() if o != "PASSED")
    assert failed == ["test_outputs_match[pp4-tp8-ep4]", "test_outputs_match[pp8-tp4-ep4]"]
    result.stdout.fnmatch_lines(["*pp8-tp4-ep4: prompt 0 *: first differing position 0: token "
                                 "* vs token * in pp8-tp4-ep4 of the reference run good*"])
    # the gate's table says what it compared besides speed, and every view says it failed
    result.stdout.fnmatch_lines(["outputs: WRONG on 2 of 2 layouts (*) — fails the gate",
                                 "accuracy: not compared*"])
    (record,) = [r for r in History(reports).records() if r.run_id != "good"]
    # (a loaded machine may add "(N significant)": speed drifts between runs, under the
    # thresholds; the gate's failure is the outputs)
    assert (record.gate.split(" (")[0], record.correctness) == ("fail: outputs", "disagree")
    page = (reports / record.folder / "report.html").read_text()
    assert 'ppsweep-decision none" data-gate="fail"' in page


def test_reuse_skips_identical_layouts_and_lists_differences(
    pytester: pytest.Pytester, reference: tuple[Path, Path]
) -> None:
    folder, reports = reference
    result = sweep(pytester, folder, reports, "--ppsweep-reuse", "good", "--ppsweep-run-id", "r1")
    # nothing booted: both reused ("R", "12 reused"; not skipped), no gate
    assert result.parseoutcomes() == {"reused": 12, "deselected": 2}, result.stdout.str()[-2000:]
    new = reports / "r1"
    assert not (new / "progress.log").read_text().count("booting on")
    reused = rows(new / "results.csv")
    assert len(reused) == 4 and all(r["reused"] == "True" for r in reused)
    assert "reused" in (new / "report.html").read_text()
    # Any difference in the manifest refuses the reuse, and says which.
    toml = folder / "ppsweep.toml"
    toml.write_text(toml.read_text().replace("chunked_prefill_size = 8192",
                                             "chunked_prefill_size = 4096"))
    result = sweep(pytester, folder, reports, "--ppsweep-reuse", "good", "--ppsweep-run-id", "r2")
    result.assert_outcomes(passed=12, deselected=2)
    log = (reports / "r2" / "progress.log").read_text()
    assert "not reused from good" in log and "chunked_prefill_size: 8192 → 4096" in log


def test_resume_after_a_kill_runs_every_round_once(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder = sweep_dir(TWO, scale=100, edits=GATE)
    reports = tmp_path / "reports"
    cmd = [sys.executable, "-m", "pytest", str(folder), "--ppsweep-reports", str(reports),
           "--ppsweep-run-id", "killed", "-p", "no:cacheprovider"]
    proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = reports / "killed" / "results.csv"
    try:
        deadline = time.monotonic() + 180
        while len(rows(results)) < 1 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert rows(results), "no round finished before the kill"
        proc.send_signal(signal.SIGKILL)  # no cleanup at all: the resume must cope
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = rows(results)
    result = sweep(pytester, folder, reports, "--ppsweep-resume", reports / "killed")
    assert result.ret == 0, result.stdout.str()[-4000:]
    after = rows(results)
    keys = [(r["config_id"], r["concurrency"], r["repeat"]) for r in after]
    assert sorted(keys) == sorted(
        (c, "4", str(r)) for c in ("pp8-tp4-ep4", "pp4-tp8-ep4") for r in (1, 2)
    ), keys  # every round exactly once
    assert {tuple(r.items()) for r in before} <= {tuple(r.items()) for r in after}
    assert not find_local("killed")
    assert len([p for p in reports.iterdir() if p.is_dir()]) == 1  # continued in its own folder


def test_bad_gate_options_fail_before_anything_boots(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder, reports = sweep_dir(ONE), tmp_path / "reports"
    bad = sweep(pytester, folder, reports, "--ppsweep-threshold", "tps:-3")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--ppsweep-threshold:*tps*"])
    missing = sweep(pytester, folder, reports, "--ppsweep-compare", "nope")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--ppsweep-compare: reference 'nope'*looked for*"])
    assert not run_dir_exists(reports)


def run_dir_exists(reports: Path) -> bool:
    return reports.exists() and any(p.is_dir() for p in reports.iterdir())


# A tiny SLO sweep on the gate's 16K prompts (8 a round, C=4, 2 repeats): each layout's
# highest C within TTFT p50 ≤ 16 s, searched from 1 to 8 (then 2, then 4: brackets [1, 2),
# [2, 4), [4, 8)), the final C repeated once more. On a loaded machine at this time scale one
# layout's TTFT at one C moves by tens of % from one run to the next: brackets this coarse keep
# the same server's pair within noise, and the 4× slower server falls far below them (a lone
# prompt of it takes longer than the limit).
SLO_GATE = GATE | {"vocab_size = 1000\n": """vocab_size = 1000

[workload.slo]
ttft_p50_s = 16.0
search = "concurrency"
min = 1
max = 8
precision = 4
max_probes = 4
max_refine = 2
"""}


def probes(run: Path, config_id: str) -> list[dict[str, str]]:
    return [r for r in rows(run / "slo_probes.csv") if r["config_id"] == config_id]


def test_a_killed_search_resumes_and_the_gate_fails_a_fallen_load(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    """Three runs of one SLO sweep. (1) Killed during PP4's search, after PP8's finished;
    (2) resumed: PP8 is not booted again nor any of its probes repeated, PP4's search goes on
    from its recorded probes to its end; that run is the gate's reference. (3) PP8's server
    4× slower (its own emulator profile): the gate fails PP8, whose highest C within the SLO
    fell beyond noise (or to none), and passes PP4, searched again on the same server (a
    within-noise pair).
    """
    folder = sweep_dir(TWO, scale=200, edits=SLO_GATE, net="127.0.58")
    reports = tmp_path / "reports"
    run = reports / "good"
    cmd = [sys.executable, "-m", "pytest", str(folder), "--ppsweep-reports", str(reports),
           "--ppsweep-run-id", "good", "-p", "no:cacheprovider"]
    proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while (not probes(run, "pp4-tp8-ep4") and time.monotonic() < deadline
               and proc.poll() is None):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # no cleanup at all: the resume must cope
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    pp8, pp4 = probes(run, "pp8-tp4-ep4"), probes(run, "pp4-tp8-ep4")
    assert pp4 and (run / "slo" / "pp8-tp4-ep4.json").is_file(), "killed outside PP4's search"
    assert not (run / "slo" / "pp4-tp8-ep4.json").exists(), "PP4's search ended before the kill"
    resumed = sweep(pytester, folder, reports, "--ppsweep-resume", run)
    assert resumed.ret == 0, resumed.stdout.str()[-4000:]
    assert probes(run, "pp8-tp4-ep4") == pp8  # a finished search is not repeated
    after = probes(run, "pp4-tp8-ep4")
    assert after[:len(pp4)] == pp4 and len(after) > len(pp4)  # kept, then finished
    assert [r["probe"] for r in after] == [str(k) for k in range(1, len(after) + 1)]
    assert json.loads((run / "slo" / "pp4-tp8-ep4.json").read_text())["probes"] == sum(
        r["phase"] == "search" for r in after)
    log = (run / "progress.log").read_text()
    assert log.count("pp8-tp4-ep4: booting on") == 1, "PP8 booted again"
    assert f"pp4-tp8-ep4: SLO search resumed: {len(pp4)} probe(s) kept" in log

    toml = folder / "ppsweep.toml"
    toml.write_text(toml.read_text().replace(
        "pp = 8\ntp = 4\n", f'pp = 8\ntp = 4\nenv = {{ PPSWEEP_SIM_PROFILE = '
        f'"{slower_profile(tmp_path, 4.0)}" }}\n'))
    result = sweep(pytester, folder, reports, "--ppsweep-compare", "good")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-4000:]
    seen = outcomes(out)
    assert seen["test_slo_no_regression[pp8-tp4-ep4]"] == "FAILED"
    assert seen["test_slo_no_regression[pp4-tp8-ep4]"] == "PASSED"
    assert seen["test_slo[pp8-tp4-ep4]"] == "PASSED"  # the slower server works, carries less
    # gate/sloregress.py: the capacity intervals where both runs have them, else the brackets
    assert re.search(r"pp8-tp4-ep4: (highest load within TTFT p50 ≤ 16 s fell at least "
                     r"[\d.]+ % \(noise [\d.]+ %; bracket rule: [^)]*\): now|capacity within "
                     r"TTFT p50 ≤ 16 s fell [\d.]+ %, at least [\d.]+ % with 95% confidence "
                     r"\(capacity interval rule|no load within TTFT p50 ≤ 16 s any more "
                     r"\(reference: ≥ )", out), out[-4000:]
    assert "pp4-tp8-ep4: highest load within TTFT p50 ≤ 16 s fell" not in out
    assert "pp4-tp8-ep4: capacity within TTFT p50 ≤ 16 s fell" not in out
