"""The plugin without its optional plugins, and resume bookkeeping done by the plugin itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.outcomes import outcomes
from support.runs import rows, run_dir

# A user's own acceptance file: other names, other asserts, no bookkeeping calls at all.
REWRITTEN = '''
def test_layout_is_what_was_asked(ppsweep_service, ppsweep_config):
    assert ppsweep_service.topology.pp == ppsweep_config.pp


def test_every_request_completes(ppsweep, ppsweep_service, concurrency):
    rounds = ppsweep.run_rounds(ppsweep_service, concurrency)
    assert all(r.completed == r.num_requests for r in rounds)


def test_no_fatal_line(ppsweep_service):
    assert not ppsweep_service.service.findings()
'''


def run(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*[str(a) for a in args], timeout=600)


@pytest.mark.parametrize("disabled", ["xdist", "html"])
def test_sweep_runs_without_an_optional_plugin(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path, disabled: str
) -> None:
    reports = tmp_path / "reports"
    result = run(pytester, sweep_dir(), "-v", "-p", f"no:{disabled}",
                 "--ppsweep-config", "pp8", "--ppsweep-reports", reports)
    result.assert_outcomes(passed=8, deselected=2)  # no reference: no gate items
    folder = run_dir(reports)
    assert len(rows(folder / "results.csv")) == 2 * 2
    assert (folder / "summary.csv").is_file() and (folder / "benchmark.json").is_file()
    text = result.stdout.str()
    assert "ppsweep summary:" in text
    if disabled == "html":
        assert not (folder / "report.html").exists()
        result.stdout.fnmatch_lines(
            ["ppsweep: pytest-html is not active (-p no:html): no HTML report; the run folder "
             "has every table"]
        )
    else:
        assert "SIMULATED" in (folder / "report.html").read_text()
        assert "pytest-html is not active" not in text


def test_concurrency_option_runs_only_the_chosen_points(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    """--ppsweep-concurrency (bisect's selection of the regressed points): the other C is
    never collected, run.json says which Cs were selected; a C no workload has is a usage
    error that names the option, what was expected and what was found."""
    folder, reports = sweep_dir(), tmp_path / "reports"
    bad = run(pytester, folder, "--ppsweep-concurrency", "3", "--ppsweep-reports", reports)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--ppsweep-concurrency: expected one of 2, 4 (the concurrency "
                              "of *ppsweep.toml's workloads), found '3'*"])
    assert not reports.exists()  # nothing launched, nothing written
    result = run(pytester, folder, "-v", "--ppsweep-config", "pp8", "--ppsweep-concurrency",
                 "4", "--ppsweep-reports", reports)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert "c2]" not in result.stdout.str()  # the C=2 items do not exist
    got = rows(run_dir(reports) / "results.csv")
    assert {r["concurrency"] for r in got} == {"4"} and len(got) == 2  # 2 repeats at C=4


def test_resume_with_a_rewritten_test_file_skips_what_finished(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder, reports = sweep_dir(), tmp_path / "reports"
    (folder / "test_sweep.py").write_text(REWRITTEN)
    first = run(pytester, folder, "-v", "-k", "pp8", "--ppsweep-reports", reports,
                "--ppsweep-run-id", "part")
    first.assert_outcomes(passed=4, deselected=4)  # one layout ran, the other never started
    part = reports / "part"
    facts = {r["config_id"]: r for r in rows(part / "configs.csv")}
    # recorded by the plugin, not by the tests
    assert facts["pp8-tp4-ep4"]["topology_ok"] == "True"
    assert facts["pp8-tp4-ep4"]["log_clean"] == "True"
    before = rows(part / "results.csv")

    resumed = run(pytester, folder, "-v", "--ppsweep-reports", reports,
                  "--ppsweep-resume", part)
    assert resumed.ret == 0, resumed.stdout.str()[-3000:]
    seen = outcomes(resumed.stdout.str())
    # a resumed point's tests say from which run they are kept, not "s" / "SKIPPED"
    assert {o for t, o in seen.items() if "pp8-tp4-ep4" in t} == {"REUSED"}
    out = resumed.stdout.str()
    assert out.count("REUSED part") == 4 and "SKIPPED" not in out, out[-3000:]
    assert "pp8-tp4-ep4: reused part: done in this run (resumed)" in out
    assert resumed.parseoutcomes()["reused"] == 4
    assert {o for t, o in seen.items() if "pp4-tp8-ep4" in t} == {"PASSED"}
    after = rows(part / "results.csv")
    keys = sorted((r["config_id"], r["concurrency"], r["repeat"]) for r in after)
    assert keys == sorted(
        (c, k, r) for c in ("pp4-tp8-ep4", "pp8-tp4-ep4") for k in ("2", "4") for r in ("1", "2")
    )
    assert {tuple(r.items()) for r in before} <= {tuple(r.items()) for r in after}
    log = (part / "progress.log").read_text()
    assert log.count("pp8-tp4-ep4: booting on") == 1  # not booted again
    assert log.count("pp4-tp8-ep4: booting on") == 1


def test_resume_runs_again_a_layout_whose_test_failed(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder, reports = sweep_dir(), tmp_path / "reports"
    test_file = folder / "test_sweep.py"
    test_file.write_text(REWRITTEN + "\n\ndef test_mine(ppsweep_service):\n    assert False\n")
    first = run(pytester, folder, "-k", "pp8", "--ppsweep-reports", reports,
                "--ppsweep-run-id", "failed")
    first.assert_outcomes(passed=4, failed=1, deselected=5)
    test_file.write_text(REWRITTEN + "\n\ndef test_mine(ppsweep_service):\n    assert True\n")
    resumed = run(pytester, folder, "-v", "-k", "pp8", "--ppsweep-reports", reports,
                  "--ppsweep-resume", reports / "failed")
    assert resumed.ret == 0, resumed.stdout.str()[-3000:]
    seen = outcomes(resumed.stdout.str())
    assert seen["test_mine[pp8-tp4-ep4]"] == "PASSED"  # booted again: its test had failed
    assert seen["test_every_request_completes[pp8-tp4-ep4-c2]"] == "REUSED"  # rounds kept
