"""Expected failures are pytest's xfail (issue 39 point 3): a point an ``[[expect]]`` names
that fails the way it says is XFAIL with the reason and the run exits 0; one that boots is
XPASS(strict) and fails; one that fails another way (NCCL where an OOM was expected) fails,
naming both. On the emulator, PP8 carries the fault in its own env (support.matrices)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.matrices import CONFIGS
from support.outcomes import outcomes

pytestmark = pytest.mark.slow

EXPECT_PP8_OOM = """
[[expect]]
layout = "pp8-*"
failure = "oom"
reason = "its buffers do not fit"
"""


def _run(pytester: pytest.Pytester, folder: Path, reports: Path) -> pytest.RunResult:
    return pytester.runpytest_subprocess(str(folder), "-v", "-rxX", "--ppsweep-reports",
                                         str(reports), "-k", "pp8", timeout=600)


def _folder(sweep_dir: Callable[..., Path], fault: str) -> Path:
    configs = CONFIGS + (f'env = {{ PPSWEEP_SIM_FAULTS = "{fault}" }}\n' if fault else "")
    folder = sweep_dir(configs)
    toml = folder / "ppsweep.toml"
    toml.write_text(toml.read_text() + EXPECT_PP8_OOM)
    return folder


def test_the_failure_expected_is_xfail_and_the_run_passes(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    result = _run(pytester, _folder(sweep_dir, "oom_load"), tmp_path / "reports")
    text = result.stdout.str()
    seen = outcomes(text)
    pp8 = {t: o for t, o in seen.items() if "pp8-tp4-ep4" in t}
    assert pp8 and set(pp8.values()) == {"XFAIL"}, text[-3000:]
    assert result.ret == 0, text[-3000:]
    result.stdout.fnmatch_lines(["*XFAIL*test_topology[[]pp8-tp4-ep4[]]*pp8-tp4-ep4: oom expected "
                                 "(its buffers do not fit)*"])


def test_a_point_that_boots_is_xpass_strict_and_fails(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    result = _run(pytester, _folder(sweep_dir, ""), tmp_path / "reports")
    text = result.stdout.str()
    assert result.ret == 1, text[-3000:]
    result.stdout.fnmatch_lines(["*[[]XPASS(strict)[]] pp8-tp4-ep4: oom expected (its buffers do "
                                 "not fit)*"])


def test_a_failure_of_another_kind_still_fails(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    result = _run(pytester, _folder(sweep_dir, "nccl_init"), tmp_path / "reports")
    text = result.stdout.str()
    seen = outcomes(text)
    assert seen.get("test_topology[pp8-tp4-ep4]") == "ERROR", text[-3000:]
    assert "XFAIL" not in set(seen.values()), text[-3000:]
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*pp8-tp4-ep4: oom expected (its buffers do not fit), but it "
                                 "failed otherwise (root cause: nccl)*"])
    # Its only point failed to boot: the run still ends with its answer and its status
    # (issue 39 point 6), not "no summary: missing file: …/results.csv".
    assert "no summary" not in text, text[-3000:]
    result.stdout.fnmatch_lines(["*[[]layout[]] NO VALID POINT. Excluded: pp8-tp4-ep4 (boot*",
                                 "run status: PARTIAL, 0 of 2 layouts measured*"])
    # the status lines fit pytest's 80 columns (the list of points not measured wraps); the
    # resume command stays whole on its line, to be copied
    tail = text[text.index("run status: PARTIAL"):].splitlines()
    status = tail[:next(i for i, line in enumerate(tail) if line.startswith("resume: "))]
    assert len(status) > 1 and all(len(line) <= 80 for line in status), status
    assert "pp4-tp8-ep4" in " ".join(status)
