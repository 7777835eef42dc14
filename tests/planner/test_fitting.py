"""The planner on captured data: its model mirrors the emulator's, the fit on the seeds' medians
reports every parameter with its interval and names what the data cannot identify, every
prediction has its interval, and bad input is a clear error (file, key, expected, found)."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.paths import DATA

from pytest_ppsweep.planner.data import PlannerError, load_measured, read_points_file
from pytest_ppsweep.planner.fitting import fit, load_fitted, prior_only
from pytest_ppsweep.planner.nextlayout import Candidate, Workload, decide, skip_third_repeat
from pytest_ppsweep.planner.plan import cluster_layouts, parse_workload, plan_lines, plan_rows
from pytest_ppsweep.planner.roundcost import (
    PARAMS,
    Hardware,
    Point,
    independent_priors,
    predict_log,
)
from pytest_ppsweep.report.cli import main

SEEDS = DATA / "planner" / "seeds_medians.csv"


@pytest.fixture(scope="module")
def seeds_fit():  # type: ignore[no-untyped-def]
    return fit(read_points_file(SEEDS))


@pytest.mark.parametrize("pp", [1, 2, 4, 8, 16])
def test_the_model_mirrors_the_emulators_scheduler(pp: int) -> None:
    """Same physics, no import of sim by the planner: at the emulator profile's values the
    planner gives the emulator's own virtual-time benchmark within 1 %."""
    from pytest_ppsweep.sim.model.placement import Layout
    from pytest_ppsweep.sim.model.profile import load_profile
    from pytest_ppsweep.sim.model.vbench import make_scheduler, run_round

    sched = make_scheduler(load_profile("kimi-k3-6000d"), Layout(32 // pp, pp, 4, 4))
    sim = run_round(sched, prompt_tokens=16384, output_tokens=1, concurrency=8, num_requests=40)
    theta = np.log([p.prior for p in PARAMS])
    tps, p50, p95 = np.exp(predict_log(theta, Point(pp, 32 // pp, 8), Hardware()))
    assert tps == pytest.approx(sim.input_tps, rel=0.01)
    assert p50 == pytest.approx(float(np.percentile(sim.ttft_s, 50)), rel=0.01)
    assert p95 == pytest.approx(float(np.percentile(sim.ttft_s, 95)), rel=0.02)


def test_fit_on_the_seeds_has_an_interval_for_every_parameter(seeds_fit) -> None:  # type: ignore[no-untyped-def]
    params = {p["name"]: p for p in seeds_fit.parameters()}
    assert {"chunk_gpu_s", "stage_sync_ms", "busbw_multinode_gbs", "p2p_inter_gbs",
            "boot_base_s", "warmup_s_per_stage", "act_mib_per_ktok"} <= set(params)
    for p in params.values():
        lo, hi = p["ci90"]
        assert lo <= p["value"] <= hi
    assert params["stage_sync_ms"]["identified"]  # PP1..PP16 pin the PP sync
    # one hand-off size and never a layout without P2P on the same nodes: not identifiable
    assert not params["p2p_latency_us"]["identified"]
    assert "not identified by the data" in params["p2p_latency_us"]["reason"]
    for pp, tps in ((1, 3258), (8, 8810), (16, 6701)):
        band = seeds_fit.predict(pp, 32 // pp, 8).input_tps
        assert band.contains(tps)  # measured layouts sit inside their own intervals


def test_every_prediction_has_its_interval_also_untried_layouts_and_workloads(
        seeds_fit) -> None:  # type: ignore[no-untyped-def]
    rows = plan_rows(seeds_fit, [parse_workload("c=1"), parse_workload("c=8,input=32768")])
    assert {(r.pp, r.tp) for r in rows} == {(1, 32), (2, 16), (4, 8), (8, 4), (16, 2), (32, 1)}
    assert {r.ep for r in rows if r.tp == 32} == {1, 2, 4, 8, 16, 32}
    for r in rows:
        for band in (r.prediction.input_tps, r.prediction.ttft_p50_s, r.prediction.ttft_p95_s,
                     r.prediction.mem_peak_mib, r.prediction.boot_s):
            assert band.lo < band.value < band.hi
    lines = plan_lines(rows)
    assert all("[" in line for line in lines[1:])  # never a value without its interval
    assert cluster_layouts(8, 61) == [(1, 8, 1), (1, 8, 2), (1, 8, 4), (1, 8, 8), (2, 4, 1),
                                      (2, 4, 2), (2, 4, 4), (4, 2, 1), (4, 2, 2), (8, 1, 1)]


def test_one_layout_is_too_few_its_untried_predictions_say_unidentified() -> None:
    m = read_points_file(SEEDS)
    only = replace(m, points=tuple(o for o in m.points if o.pp == 8),
                   layouts=tuple(f for f in m.layouts if f.pp == 8))
    # the priors that have not seen the seeds' other layouts (the default priors are this
    # cluster's emulator profile, fitted to all five: with them one layout predicts the rest)
    f = fit(only, priors=independent_priors())
    assert "stage_sync_ms" in f.unidentified()
    far = f.predict(1, 32, 8)
    assert far.status.startswith("unidentified: ") and "not identified by the 1 measured" in \
        far.status
    assert far.input_tps.lo < far.input_tps.value < far.input_tps.hi  # still with its interval


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    text = SEEDS.read_text()
    other = tmp_path / "other.csv"
    other.write_text(text.replace("local/sglang:kimi-k3-sm120-flashinfer-mxfp4-phase5",
                                  "local/sglang:other"))
    with pytest.raises(PlannerError, match="different images cannot be fitted together"):
        load_measured([SEEDS, other])
    mixed = tmp_path / "mixed.csv"
    lines = text.splitlines()
    mixed.write_text("\n".join([*lines[:-1], lines[-1].replace("Kimi-K3,", "Llama,")]) + "\n")
    with pytest.raises(PlannerError, match="key 'model': expected one model"):
        read_points_file(mixed)
    bad = tmp_path / "bad.csv"
    bad.write_text(text.replace("3257.96", "fast"))
    with pytest.raises(PlannerError, match=r"bad.csv: row \d+: key 'input_tps': expected a "
                                           r"number, found 'fast'"):
        read_points_file(bad)
    empty = tmp_path / "empty.csv"
    empty.write_text("\n".join(ln for ln in lines if ln.startswith(("#", "config_id"))) + "\n")
    with pytest.raises(PlannerError, match="no valid point"):
        read_points_file(empty)
    with pytest.raises(PlannerError, match="expected a run folder or a points file"):
        load_measured([tmp_path / "missing"])
    with pytest.raises(PlannerError, match="key 'c': expected an integer, found 'x'"):
        parse_workload("c=x")
    with pytest.raises(PlannerError, match="expected c=N, input=N or requests=N"):
        parse_workload("c=1,batch=3")
    (tmp_path / "p.json").write_text(json.dumps({"format": "nope"}))
    with pytest.raises(PlannerError, match="key 'format': expected 'ppsweep-planner-profile/1'"):
        load_fitted(tmp_path / "p.json")


def test_a_run_with_no_valid_round_is_refused(tmp_path: Path) -> None:
    from support.runs import seed_run

    run = seed_run(tmp_path / "run", run_id="run")
    res = run / "results.csv"
    head, *body = res.read_text().splitlines()
    cols = head.split(",")
    i = cols.index("failed")
    res.write_text("\n".join([head, *(",".join(c if k != i else "3" for k, c in
                                                 enumerate(r.split(","))) for r in body)]) + "\n")
    with pytest.raises(PlannerError, match="no valid point: expected at least one round"):
        load_measured([run])


def test_cli_fit_writes_the_profile_and_plan_prints_the_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "seeds.json"
    assert main(["fit", str(SEEDS), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "not identified by these data" in text and "stage_sync_ms" in text
    assert json.loads(out.read_text())["format"] == "ppsweep-planner-profile/1"
    assert main(["plan", "--profile", str(out), "--workload", "c=1"]) == 0
    table = capsys.readouterr().out
    assert "pp32-tp1-ep1" in table and "predicted, not measured" in table
    # ranked by predicted Input TPS, in 100 columns; the full table behind --all
    lines = [line for line in table.splitlines() if not line.startswith("plan: ")]
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    assert lines[0].split()[:2] == ["#", "layout"] and "boot s" not in lines[0]
    ranks = [int(line.split()[0]) for line in lines[1:]]
    assert ranks == list(range(1, len(ranks) + 1))
    tps = [float(line.split()[4].replace(",", "")) for line in lines[1:]]
    assert tps == sorted(tps, reverse=True) and len(set(tps)) > 1
    assert main(["plan", "--profile", str(out), "--workload", "c=1", "--all"]) == 0
    full = capsys.readouterr().out.splitlines()
    assert "boot s [90 %]" in full[0] and max(len(x) for x in full) > 100
    assert main(["plan", "--profile", str(tmp_path / "none.json")]) == 2
    assert "expected a fitted profile" in capsys.readouterr().err
    assert main(["fit", str(SEEDS)]) == 2  # a points file alone: where to write is asked for
    assert "expected --out PATH" in capsys.readouterr().err


def test_adaptive_decisions(seeds_fit) -> None:  # type: ignore[no-untyped-def]
    wl = Workload((8, 16), 16384, 40, 3)
    cands = [Candidate(f"pp{pp}", pp, 32 // pp) for pp in (1, 2, 4, 8, 16)]
    first = decide(prior_only(), cands, wl)
    assert first.boot is not None and "nothing measured yet" in first.reason
    # the seeds measured all five: with PP8 measured and the rest predicted, the rest cannot win
    m = read_points_file(SEEDS)
    only8 = fit(replace(m, points=tuple(o for o in m.points if o.pp in (4, 8)),
                        layouts=tuple(f for f in m.layouts if f.pp in (4, 8))))
    meas = [replace(o, config_id=f"pp{o.pp}") for o in m.points if o.pp in (4, 8)]
    only8.measured = [{**vars(o)} for o in meas]
    done = decide(only8, cands, wl)
    assert done.best == "pp8"
    if done.boot is None:
        assert set(done.skipped) == {"pp1", "pp2", "pp16"}
        assert all("cannot beat pp8" in why or "below" in why for why in done.skipped.values())
    # third repeat: tight spread and clearly below the best -> skipped; else kept
    assert skip_third_repeat([3000.0, 3010.0], 0.02, only8, "pp1", wl) is not None
    assert skip_third_repeat([3000.0, 3300.0], 0.02, only8, "pp1", wl) is None
    assert skip_third_repeat([8800.0, 8810.0], 0.02, only8, "pp8", wl) is None
    assert math.isfinite(done.predicted.get("pp1", (1.0, 0.0, 2.0))[0])


@pytest.mark.parametrize("verb", ["fit", "plan"])
def test_help_documents_the_planner_verbs(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([verb, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out and f"python -m pytest_ppsweep {verb} " in out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert f"  {verb}  " in capsys.readouterr().out


def test_a_runs_layout_facts_come_from_the_server_info_it_wrote(tmp_path: Path) -> None:
    """The planner reads each layout's server info where a run writes it
    (metadata/<layout>.server_info.json): its chunked prefill size and decode graph. Before,
    it looked only where no run writes, and took 8192 and a decode graph for every layout."""
    from pytest_ppsweep.planner.data import load_run_folder

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "runfolders" / "sim-format2",
                    run)
    infos = sorted((run / "metadata").glob("*.server_info.json"))
    assert len(infos) == 2
    for path in infos:
        info = json.loads(path.read_text())
        info["chunked_prefill_size"] = 4096
        info["disable_decode_cuda_graph"] = path.name.startswith("pp8-")
        path.write_text(json.dumps(info))
    measured = load_run_folder(run)
    assert measured.chunk == 4096
    graphs = {f.config_id: f.decode_graph for f in measured.layouts}
    assert graphs == {"pp4-tp8-ep4": True, "pp8-tp4-ep4": False}
