"""Validity gates the exit code on the emulator: a point whose verdict is INVALID fails
``test_valid[<layout>-c<C>]`` (the run exits non-zero), and ``[sweep] spread_rule = "warn"``
turns a spread failure into a warning (exit 0).

The emulator has no way to miscount prompt tokens, and the plugin caps min_repeats at the
repeats it runs, so the run is made INVALID by its spread: ``spread_threshold = 0.0`` is broken
by any two repeats that differ (measured timing always does). The token and repeats rules
reach the same test through the same verdict (tests/results/test_verdict_validity.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.outcomes import outcomes

ONE = "\n[[configs]]\npp = 8\ntp = 4\n"
PP8 = "pp8-tp4-ep4"


def _sweep(pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path,
           rule: str) -> pytest.RunResult:
    folder = sweep_dir(ONE, net="127.0.63", edits={
        'spread_rule = "warn"': f'spread_rule = "{rule}"\nspread_threshold = 0.0'})
    return pytester.runpytest_subprocess(
        str(folder), "-v", "-rw", "--ppsweep-reports", str(tmp_path / "reports"), timeout=600)


def test_invalid_spread_fails_test_valid_and_the_exit_code(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    result = _sweep(pytester, sweep_dir, tmp_path, "fail")
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text[-4000:]
    seen = outcomes(text)
    assert seen[f"test_prefill[{PP8}-c2]"] == "PASSED"  # every request completed: N/N is fine
    assert seen[f"test_valid[{PP8}-c2]"] == "FAILED"
    assert seen[f"test_valid[{PP8}-c4]"] == "FAILED"
    assert seen[f"test_logs_clean[{PP8}]"] == "PASSED"  # the layout's tests went on
    # "> 0.0 %", or "> 0.00 %" when the spread itself reads 0.0 at one decimal
    result.stdout.fnmatch_lines([f"*{PP8} C=2: INVALID: spread * > 0.0* %*"])


def test_spread_rule_warn_turns_the_spread_failure_into_a_warning(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    result = _sweep(pytester, sweep_dir, tmp_path, "warn")
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, text[-4000:]
    result.assert_outcomes(passed=8, deselected=2, warnings=2)
    result.stdout.fnmatch_lines([f"*spread_rule = 'warn': {PP8} C=2: spread * > 0.0 %*"])
    assert f"{PP8} C=2: VALID (warning: spread" in text  # the verdict says what it saw
