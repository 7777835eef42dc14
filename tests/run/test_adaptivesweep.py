"""The adaptive sweep's bookkeeping on a recorded run folder (no boot): refit on the rounds so
far, decide, skip with reasons, and the plan it leaves (booted-but-failed layouts included)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import cast

import pytest
from support.paths import SEED
from support.runs import record_run, seed_points

from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.run.adaptivesweep import AdaptiveSweep
from pytest_ppsweep.session import options

PP8, PP4, PP2, PP1, PP16 = ("pp8-tp4-ep4", "pp4-tp8-ep4", "pp2-tp16-ep4", "pp1-tp32-ep4",
                            "pp16-tp2-ep2")


def test_refit_decide_skip_and_plan(tmp_path: Path) -> None:
    run = record_run(tmp_path, "run", seed_points([PP8, PP4]), failed_boot=(PP2,))
    sweep = load(SEED)
    said: list[str] = []
    ada = AdaptiveSweep(sweep, [c.id for c in sweep.configs], run, 32, 8, 0.03, said.append)
    first = ada.next_layout([c.id for c in sweep.configs])  # prior only: something to boot
    assert first is not None and said[-1].startswith(f"adaptive: boot {first}: predicted")
    ada.booted[:] = [PP8, PP4, PP2]
    ada.refit()
    assert {o["config_id"] for o in ada.fitted.measured} == {PP8, PP4}
    assert ada.next_layout([PP1, PP16]) is None  # PP1 and PP16 cannot beat the measured PP8
    assert ada.decided == PP8
    for cid in (PP1, PP16):
        assert ada.skip_reason(cid) is not None
        assert ada.skip_reason(cid).startswith("predicted, not measured: predicted Input TPS")
        assert any(line.startswith(f"adaptive: skip {cid} (predicted, not measured)")
                   for line in said)
    assert sorted(ada.finish()) == sorted([PP1, PP16])
    states = {r["layout"]: r["state"] for r in csv.DictReader((run / "planner" / "plan.csv")
                                                              .open()) if r["concurrency"] == "8"}
    assert states[PP8] == states[PP4] == "measured"
    assert states[PP2] == "booted, no valid round (prediction only)"
    assert states[PP1].startswith(("predicted, not measured", "unidentified"))
    saved = json.loads((run / "planner" / "adaptive.json").read_text())
    assert saved["decided"] == PP8 and set(saved["skipped"]) == {PP1, PP16}
    # third repeat: spread 0.1 % after two repeats and far below PP8 -> skipped; PP8 itself not
    assert ada.third_repeat(PP1, 8, [3200.0, 3203.0]) is not None
    assert ada.third_repeat(PP8, 8, [8800.0, 8810.0]) is None


def test_adaptive_refuses_xdist() -> None:
    """One real pytest process: -n with --ppsweep-adaptive is a usage error (exit 4)."""
    import os
    import subprocess
    import sys

    from support.paths import REPO

    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "pytest", str(REPO / "test_matrix"),
                           "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--ppsweep-adaptive", "-n", "2", "--ppsweep-cluster", "local,local-b"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "--ppsweep-adaptive: expected a serial run" in done.stderr, done.stderr


class _Config:
    """The two options options.adaptive_tolerance reads, as pytest.Config.getoption gives them."""

    def __init__(self, adaptive: bool, tolerance: str | None) -> None:
        self.values = {"ppsweep_adaptive": adaptive, "ppsweep_adaptive_tolerance": tolerance}

    def getoption(self, name: str, default: object = None) -> object:
        return self.values.get(name, default)


@pytest.mark.parametrize(("adaptive", "tolerance", "message"), [
    (True, "x", "--ppsweep-adaptive-tolerance: expected a fraction such as 0.03, found 'x'"),
    (True, "1.5", "--ppsweep-adaptive-tolerance: expected 0 <= value < 1"),
    (False, "0.05", "expected together with --ppsweep-adaptive, found it alone"),
])
def test_a_bad_or_lone_tolerance_is_a_usage_error(adaptive: bool, tolerance: str,
                                                  message: str) -> None:
    """In process (the option parsing the plugin calls at session start; the xdist refusal
    above shows the same UsageError path ends a real pytest run with exit 4)."""
    with pytest.raises(pytest.UsageError, match=re.escape(message)):
        options.adaptive_tolerance(cast(pytest.Config, _Config(adaptive, tolerance)))


def test_the_tolerance_defaults_and_parses() -> None:
    assert options.adaptive_tolerance(cast(pytest.Config, _Config(False, None))) is None
    assert options.adaptive_tolerance(cast(pytest.Config, _Config(True, None))) == 0.03
    assert options.adaptive_tolerance(cast(pytest.Config, _Config(True, "0.05"))) == 0.05


def test_a_misfit_decides_nothing_and_writes_no_plan(tmp_path: Path) -> None:
    """PP4 at a tenth of its Input TPS with its TTFT unchanged (no cluster does that): the fit
    cannot reproduce it, so the next layout in order is booted, none is skipped, and the run
    keeps the profile with its misfit but no plan.csv."""
    run = record_run(tmp_path, "run", seed_points([PP8, PP4], **{
        f"{PP4}@8": (715.5, 17.28, 18.62), f"{PP4}@16": (715.3, 34.84, 35.95)}))
    sweep = load(SEED)
    said: list[str] = []
    ada = AdaptiveSweep(sweep, [c.id for c in sweep.configs], run, 32, 8, 0.03, said.append)
    ada.booted[:] = [PP8, PP4]
    ada.refit()
    assert ada.next_layout([PP1, PP16, PP2]) == PP1  # the sweep's order, no prediction
    assert said[-1].startswith(f"adaptive: boot {PP1}: misfit: the fit cannot reproduce")
    assert f"{PP4} C=8: Input TPS measured 716" in said[-1]
    assert not ada.skipped
    assert ada.finish() == []
    assert json.loads((run / "planner" / "profile.json").read_text())["misfit"]
    assert not (run / "planner" / "plan.csv").exists()
    assert any(line.startswith(f"adaptive: misfit: {PP4} C=8") for line in said)
