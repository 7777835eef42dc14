"""A cluster quite unlike the prior (the seeds' emulator profile with a 30x PP stage sync, fitted
on PP1, PP4 and PP16): the fit moves to it and predicts the layout it did not see; a fit that
still cannot reproduce its own measured points says "misfit", names them, and predicts nothing
(fit, plan, the adaptive sweep's decision, the report's planner section, profile.json)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.paths import DATA

from pytest_ppsweep.planner.data import LayoutFacts, Measured, Observation, read_points_file
from pytest_ppsweep.planner.fitting import fit, load_fitted
from pytest_ppsweep.planner.nextlayout import Candidate, Workload, decide
from pytest_ppsweep.planner.roundcost import PARAMS
from pytest_ppsweep.planner.trust import fit_trust
from pytest_ppsweep.report import plannerview
from pytest_ppsweep.report.cli import main

SEEDS = DATA / "planner" / "seeds_medians.csv"
SYNC_FACTOR = 30


def _emulated(profile_path: Path, pp: int, c: int) -> Observation:
    """One point of the derived cluster, measured by the emulator's scheduler in virtual time."""
    from pytest_ppsweep.sim.model.placement import Layout
    from pytest_ppsweep.sim.model.profile import load_profile
    from pytest_ppsweep.sim.model.vbench import make_scheduler, run_round

    tp = 32 // pp
    ep = min(4, tp)
    sched = make_scheduler(load_profile(str(profile_path)), Layout(tp, pp, ep, 4), seed=pp + c)
    r = run_round(sched, prompt_tokens=16384, output_tokens=1, concurrency=c, num_requests=40)
    return Observation(f"pp{pp}-tp{tp}-ep{ep}", pp, tp, ep, c, 16384, 40, r.input_tps,
                       float(np.percentile(r.ttft_s, 50)), float(np.percentile(r.ttft_s, 95)), 2,
                       0.005, str(profile_path))


@pytest.fixture(scope="module")
def slow_sync(tmp_path_factory: pytest.TempPathFactory) -> tuple[Measured, Observation, float]:
    """PP1, PP4, PP16 (C=8) of the seeds' profile with a 30x stage sync, and PP8 held out."""
    from pytest_ppsweep.sim.model.profile import resolve_profile_path

    text = resolve_profile_path("kimi-k3-6000d").read_text()
    sync = float(re.search(r"^stage_sync_ms = ([0-9.]+)", text, re.M).group(1))  # type: ignore[union-attr]
    path = tmp_path_factory.mktemp("profile") / "slow-sync.toml"
    path.write_text(re.sub(r"^stage_sync_ms = [0-9.]+", f"stage_sync_ms = {sync * SYNC_FACTOR}",
                           text, flags=re.M))
    points = tuple(_emulated(path, pp, 8) for pp in (1, 4, 16))
    facts = tuple(LayoutFacts(o.config_id, o.pp, o.tp, o.ep, None, None, None, True, 0)
                  for o in points)
    return (Measured(points, facts, "Kimi-K3", "emulated", (str(path),)), _emulated(path, 8, 8),
            sync * SYNC_FACTOR)


def test_the_fit_moves_to_a_cluster_unlike_the_prior(
        slow_sync: tuple[Measured, Observation, float]) -> None:
    measured, pp8, true_sync = slow_sync
    f = fit(measured)
    assert fit_trust(f).trusted, fit_trust(f).misfits
    sync = next(p["value"] for p in f.parameters() if p["name"] == "stage_sync_ms")
    assert 0.7 * true_sync < sync < 1.3 * true_sync  # not the prior's, 30 times less
    for o in measured.points:  # its own points inside their intervals
        assert f.predict(o.pp, o.tp, 8).input_tps.contains(o.input_tps)
    band = f.predict(8, 4, 8).input_tps
    assert band.contains(pp8.input_tps)
    assert abs(band.value / pp8.input_tps - 1) < 0.15  # was 5,834 against 1,976 measured


def test_a_fit_that_cannot_move_says_misfit_names_the_point_and_predicts_nothing(
        slow_sync: tuple[Measured, Observation, float], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    measured, _, _ = slow_sync
    pinned = tuple(replace(p, prior_sd=0.01) if p.name == "stage_sync_ms" else p
                   for p in PARAMS)  # a prior the data cannot move
    f = fit(measured, priors=pinned)
    trust = fit_trust(f)
    assert not trust.trusted
    assert any(m.startswith("pp16-tp2-ep2 C=8: Input TPS measured") for m in trust.misfits)
    assert "misfit" in trust.summary() and "pp16-tp2-ep2 C=8" in trust.summary()
    # saved in profile.json, read back by every consumer
    run = tmp_path / "run"
    f.write(run / "planner" / "profile.json")
    raw = json.loads((run / "planner" / "profile.json").read_text())
    assert raw["misfit"] == list(trust.misfits)
    assert fit_trust(run).misfits == trust.misfits == fit_trust(raw).misfits
    assert load_fitted(run).misfits() == list(trust.misfits)
    old = {k: v for k, v in raw.items() if k != "misfit"}  # a profile from before the field
    assert not fit_trust(old).trusted
    # plan prints no prediction
    assert main(["plan", "--profile", str(run)]) == 1
    out = capsys.readouterr().out
    assert "misfit: pp16-tp2-ep2 C=8" in out and "[" not in out.split("misfit:", 1)[0]
    assert not (run / "planner" / "plan.csv").exists()
    # the report's planner section names the points and shows no table
    (run / "planner" / "plan.csv").write_text("layout,state\nstale,predicted\n")
    section = plannerview.html_section(run)
    assert "Planner: misfit" in section and "pp16-tp2-ep2 C=8" in section
    assert "<table" not in section
    lines = plannerview.terminal_lines(run)
    assert any(ln.startswith("  misfit: pp16-tp2-ep2 C=8") for ln in lines)
    # the adaptive sweep decides nothing from it: the next layout in order, none skipped
    cands = [Candidate("pp8-tp4-ep4", 8, 4), Candidate("pp2-tp16-ep4", 2, 16)]
    d = decide(f, cands, Workload((8,)))
    assert d.boot == "pp8-tp4-ep4" and not d.skipped and not d.predicted
    assert d.reason.startswith("misfit")


def test_fit_says_misfit_on_points_no_parameters_can_reproduce(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PP16's Input TPS cut to a tenth with its TTFT unchanged: no cluster does that (a closed
    loop's TPS follows from its TTFT), so the fit misses it and says so; the seeds' own table
    is trusted."""
    lines = SEEDS.read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(ln.replace(",6701.04,", ",670.10,") for ln in lines) + "\n")
    assert main(["fit", str(bad), "--out", str(tmp_path / "p.json")]) == 1
    out = capsys.readouterr().out
    assert "misfit: the fit cannot reproduce" in out
    assert "misfit: pp16-tp2-ep2 C=8: Input TPS measured 670" in out
    assert json.loads((tmp_path / "p.json").read_text())["misfit"]
    assert fit_trust(fit(read_points_file(SEEDS))).trusted
