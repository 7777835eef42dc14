"""The seeds' own answers come out by themselves (issue 25 point 7) from emulator runs of the
four sweeps of test_matrix/, stored in tests/data/answers/ (results.csv, configs.csv, run.json
and the manifests: what the results layer reads); each sweep is analysed once per module."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.paths import REPO

from pytest_ppsweep.report.answerview import terminal_lines
from pytest_ppsweep.report.html import build_report
from pytest_ppsweep.report.terminal import terminal_summary
from pytest_ppsweep.results.answers import (
    DECIDED,
    DECIDED_ONE_BOOT,
    INCONCLUSIVE,
    Answer,
    one_line,
    read_answers,
)
from pytest_ppsweep.results.pipeline import Analysis, analyse, save

STORED = REPO / "tests" / "data" / "answers"


@pytest.fixture(scope="module")
def runs() -> dict[str, Analysis]:
    return {name: analyse(STORED / name) for name in ("ppsweep", "a2a", "microbatch", "chunk")}


def _answers(runs: dict[str, Analysis], name: str) -> list[Answer]:
    return runs[name][3]


def _axis(answers: list[Answer], layout: str, workload: str = "") -> Answer:
    return next(a for a in answers if a.kind == "axis" and a.layout == layout
                and a.workload == workload)


def _row(answer: Answer, value: object) -> dict[str, object]:
    return next(r for r in answer.table if r["value"] == value)


def test_seeds_sweep_pp8_primary_pp4_fallback_pp16_caveat(runs: dict[str, Analysis]) -> None:
    (layout,) = _answers(runs, "ppsweep")
    assert layout.kind == "layout" and layout.status == DECIDED
    assert (layout.answer, layout.fallback) == ("pp8-tp4-ep4", "pp4-tp8-ep4")
    assert layout.objective == ("input_tps", "ttft_p50_s")
    assert layout.ranking[-1] == "pp1-tp32-ep4"
    (caveat,) = layout.caveats
    assert caveat.startswith("pp16-tp2-ep2 differs from pp8-tp4-ep4") and "layout.ep" in caveat
    beaten = {e.versus for e in layout.evidence if e.verdict == "better"}
    assert beaten == set(layout.ranking[1:])  # beyond the noise rule, every rival


def test_a2a_per_layout_which_backends_boot_and_their_headroom(
        runs: dict[str, Analysis]) -> None:
    answers = _answers(runs, "a2a")
    layout = next(a for a in answers if a.kind == "layout")
    # the layout question compares layouts only (a2a = none), never variants as layouts
    assert set(layout.ranking) == {"pp8-tp4-ep4", "pp4-tp8-ep4"} and layout.answer == "pp8-tp4-ep4"
    pp8, pp4 = _axis(answers, "pp8-tp4-ep4"), _axis(answers, "pp4-tp8-ep4")
    assert pp8.axis == pp4.axis == "moe_a2a_backend"
    # per layout, which backends boot (with their headroom) and which do not (none shown)
    booted = {(a.layout, str(r["value"])): (r["state"], r["headroom_mib"])
              for a in (pp8, pp4) for r in a.table}
    assert {k: v[0] for k, v in booted.items()} == {
        ("pp8-tp4-ep4", "none"): "booted", ("pp8-tp4-ep4", "deepep"): "booted",
        ("pp8-tp4-ep4", "flashinfer"): "booted", ("pp4-tp8-ep4", "none"): "booted",
        ("pp4-tp8-ep4", "deepep"): "OOM", ("pp4-tp8-ep4", "flashinfer"): "booted"}
    for (layout, value), (state, headroom) in booted.items():
        assert (isinstance(headroom, float) and headroom > 0) == (state == "booted"), (
            layout, value, headroom)
    fits = _row(pp8, "deepep")
    assert fits["state"] == "booted" and isinstance(fits["headroom_mib"], float)
    assert fits["headroom_mib"] > 0  # DeepEP fits PP8's worst rank
    assert _row(pp4, "deepep")["state"] == "OOM"  # and OOMs on PP4
    assert dict(pp4.excluded)["pp4-tp8-ep8-a2a_deepep"].startswith("boot failed")
    lines = "\n".join(terminal_lines(answers))
    assert "deepep           pp4-tp8-ep8-a2a_deepep      OOM" in lines
    # step-to-step deltas within one set of axis values (never a variant -> a layout)
    table = runs["a2a"][1].table
    steps = dict(zip(table["config_id"], table["step_from"], strict=True))
    assert steps["pp4-tp8-ep4"] == "pp8-tp4-ep4"
    assert steps["pp4-tp8-ep8-a2a_flashinfer"] == "pp8-tp4-ep4-a2a_flashinfer"


def test_microbatch_per_workload_objective_and_the_cap(runs: dict[str, Analysis]) -> None:
    answers = _answers(runs, "microbatch")
    layouts = {a.workload: a for a in answers if a.kind == "layout"}
    assert set(layouts) == {"prefill", "decode"}  # one question per workload, never mixed
    assert layouts["decode"].objective == ("output_tps", "tpot_p50_s")
    assert layouts["prefill"].objective == ("input_tps", "ttft_p50_s")
    for a in layouts.values():
        assert all(p.endswith("-" + a.workload) for p in a.ranking)
    # §5: leave the cap unset; a cap of 1 is worse on both layouts, for both workloads. The
    # stored run (time scale 20, recorded on a 2-core machine loaded ~5-9x its cores) separates
    # prefill beyond noise (PP4 -14 to -16 %, PP8 -4 to -8 %); its decode rounds spread 3-11 %,
    # and the data may say only "inconclusive", with the rerun, never that the cap wins.
    for layout in ("pp4-tp8-ep4", "pp8-tp4-ep4"):
        for workload in ("prefill", "decode"):
            cap = _axis(answers, layout, workload)
            assert cap.axis == "pp_max_micro_batch_size", (layout, workload)
            if workload == "prefill" or cap.status == DECIDED:
                assert cap.status == DECIDED and cap.extra["value"] == "unset", (layout, workload)
                assert cap.answer == f"{layout}-{workload}"
                assert _row(cap, 1)["verdict"] != "better"
            else:
                assert cap.status == INCONCLUSIVE and cap.answer is None, (layout, workload)
                assert cap.rerun and f"{layout}-mbs1-{workload}" in cap.rerun


def test_chunk_16k_ooms_on_pp4_and_8k_stays(runs: dict[str, Analysis]) -> None:
    answers = _answers(runs, "chunk")
    pp4, pp8 = _axis(answers, "pp4-tp8-ep4"), _axis(answers, "pp8-tp4-ep4")
    assert _row(pp4, 16384)["state"] == "OOM" and _row(pp8, 16384)["state"] == "booted"
    # 8192 leads chunk 4096 by a gap under the one-boot bound, measured in one boot each
    assert pp8.status == DECIDED_ONE_BOOT and pp8.extra["value"] == 8192


def test_answers_json_schema_and_one_line(runs: dict[str, Analysis], tmp_path: Path) -> None:
    data, summary, _, answers = runs["a2a"]
    folder = tmp_path / "run"
    folder.mkdir()
    save(type(data)(folder, data.meta, data.results, data.configs), summary, answers)
    raw = json.loads((folder / "answers.json").read_text())
    assert raw["format"] == "ppsweep-answers/1" and raw["run_id"] == data.meta.run_id
    keys = {"kind", "workload", "objective", "status", "answer", "fallback", "ranking",
            "evidence", "rerun"}
    for item in raw["answers"]:
        assert keys <= set(item)
        for ev in item["evidence"]:
            assert {"delta_pct", "noise_pct", "verdict"} <= set(ev)
    assert read_answers(folder) == raw["answers"]
    line = one_line(read_answers(folder))
    assert line.startswith("layout pp8-tp4-ep4; joint inconclusive; "
                           "axis moe_a2a_backend[pp8-tp4-ep4]")


def test_the_joint_question_ranks_every_layout_and_axis_value_as_one_family(
        runs: dict[str, Analysis]) -> None:
    """Issue 37 point 6: with axes, the best point overall beside the per-axis answers."""
    answers = _answers(runs, "chunk")
    (joint,) = [a for a in answers if a.kind == "joint"]
    # every valid point of every layout × chunk value; the OOM is excluded with its reason
    assert set(joint.ranking) == {"pp4-tp8-ep4", "pp4-tp8-ep4-chunk4k", "pp8-tp4-ep4",
                                  "pp8-tp4-ep4-chunk4k", "pp8-tp4-ep4-chunk16k"}
    assert dict(joint.excluded)["pp4-tp8-ep4-chunk16k"].startswith("boot failed")
    assert joint.status == DECIDED_ONE_BOOT and joint.answer == "pp8-tp4-ep4"
    assert ("[best point overall] DECIDED WITHIN ONE BOOT: pp8-tp4-ep4"
            in "\n".join(terminal_lines(answers)))
    # a sweep without axes asks no joint question
    assert not [a for a in _answers(runs, "ppsweep") if a.kind == "joint"]


def test_a_layout_whose_baseline_value_failed_takes_part_with_its_best_valid_value(
        tmp_path: Path) -> None:
    """Issue 37 point 6: PP8's point at the baseline chunk (8192) OOMs here (the stored chunk
    run with that boot made to fail); the layout question must not hand the answer to PP4 as
    "the only valid point": PP8 takes part with its best valid chunk, and the answer says so."""
    folder = tmp_path / "chunk"
    shutil.copytree(STORED / "chunk", folder)
    configs = (folder / "configs.csv").read_text().splitlines()
    head = configs[0].split(",")
    for i, line in enumerate(configs):
        cells = line.split(",")
        if cells[0] == "pp8-tp4-ep4":
            row = dict(zip(head, cells, strict=True))
            row.update(boot_ok="False", topology_ok="", boot_error=(
                "boot failed: torch.OutOfMemoryError: CUDA out of memory"),
                mem_peak_mib="", mem_headroom_mib="")
            configs[i] = ",".join(row[h] for h in head)
    (folder / "configs.csv").write_text("\n".join(configs) + "\n")
    results = (folder / "results.csv").read_text().splitlines()
    (folder / "results.csv").write_text("\n".join(
        [results[0]] + [r for r in results[1:] if not r.startswith("pp8-tp4-ep4,")]) + "\n")
    answers = analyse(folder)[3]
    (layout,) = [a for a in answers if a.kind == "layout"]
    stand_in = layout.extra["stand_ins"]["pp8-tp4-ep4"]
    assert stand_in in ("pp8-tp4-ep4-chunk4k", "pp8-tp4-ep4-chunk16k")
    assert set(layout.ranking) == {"pp4-tp8-ep4", stand_in}
    assert any(c.startswith(f"pp8-tp4-ep4 takes part with its best valid point {stand_in}: "
                            "at the baseline values its point pp8-tp4-ep4 boot failed")
               for c in layout.caveats), layout.caveats
    assert layout.status != "measured"  # compared, never "the only valid point"


def test_an_expected_oom_is_evidence_and_a_partial_run_counts_each_questions_points(
        tmp_path: Path) -> None:
    """a2a with its [[expect]] (PP4 + DeepEP OOMs, as seeds §10 says) closed as partial (that
    point never measured): the answers name the OOM as expected, the questions whose points
    were all measured or failed as expected stay decided, and the verdict line says so."""
    run = tmp_path / "a2a"
    shutil.copytree(STORED / "a2a", run)
    meta = run / "metadata" / "run.json"
    raw = json.loads(meta.read_text())
    deepep = "pp4-tp8-ep8-a2a_deepep"
    raw["expect"] = [{"layout": "pp4-*", "axes": {"moe_a2a_backend": "deepep"},
                      "failure": "oom", "reason": "seeds §10"}]
    raw["run_status"] = "partial"
    raw["run_status_detail"] = {"measured": [c for c in raw["order"] if c != deepep],
                                "missing": [deepep], "interrupted_at": None, "resume": "pytest"}
    meta.write_text(json.dumps(raw))
    data, summary, verdicts, answers = analyse(run)
    assert data.meta.status is not None and data.meta.status.lines()[0] == (
        f"run status: PARTIAL, 5 of 6 layouts measured; not measured: {deepep} (failed as "
        "expected)")
    layout = next(a for a in answers if a.kind == "layout")
    assert layout.status == DECIDED and layout.answer == "pp8-tp4-ep4"  # deepep is no layout
    assert set(layout.extra["points"]) == {"pp8-tp4-ep4", "pp4-tp8-ep4"}
    pp4 = _axis(answers, "pp4-tp8-ep4")
    assert pp4.status == DECIDED_ONE_BOOT, pp4.extra.get("text")
    assert dict(pp4.excluded)[deepep] == "OOM, as expected: seeds §10"
    assert _row(pp4, "deepep")["verdict"] == "OOM, as expected"
    lines = terminal_summary(summary, verdicts, answers, 100)
    assert any(line.startswith(f"{deepep} C=8: OOM, as expected: seeds §10; INVALID: boot "
                               "failed") for line in lines), lines
    page = build_report(run).read_text()
    assert (f"Run status: <b>PARTIAL, 5 of 6 layouts measured; not measured: {deepep} (failed "
            "as expected)</b>") in page
    assert (f'<li class="expected">{deepep} C=8: OOM, as expected: seeds §10; INVALID: boot '
            "failed") in page
    # without the expectation, the same OOM is a failure: pp4's answer among 2 of its 3 points
    raw.pop("expect")
    meta.write_text(json.dumps(raw))
    again = analyse(run)
    assert again[0].meta.status is not None and "expected" not in again[0].meta.status.lines()[0]
    unexpected = _axis(again[3], "pp4-tp8-ep4")
    assert unexpected.status == "partial"
    assert unexpected.extra["text"].startswith(
        f"decided within one boot among 2 of 3 points: pp4-tp8-ep4; {deepep} failed.")


def test_an_axis_answer_carries_each_values_kv_cache(tmp_path: Path) -> None:
    """Each row of an axis answer carries the KV cache its point's engine reported
    (configs.csv kv_tokens, kv_requests): a memory or backend knob moves it. A point that did
    not boot, or a run folder written before the columns, has None."""
    import pandas as pd

    stored = analyse(STORED / "a2a")[3]
    assert all(r["kv_tokens"] is None for a in stored if a.kind == "axis" for r in a.table)
    run = tmp_path / "a2a"
    shutil.copytree(STORED / "a2a", run)
    frame = pd.read_csv(run / "configs.csv")
    booted = frame["boot_error"].isna() | (frame["boot_error"] == "")
    frame["kv_tokens"] = [655_360.0 + i if ok else float("nan") for i, ok in enumerate(booted)]
    frame["kv_requests"] = [39.0 if ok else float("nan") for ok in booted]
    frame.to_csv(run / "configs.csv", index=False)
    answers = analyse(run)[3]
    rows = [r for a in answers if a.kind == "axis" for r in a.table]
    assert rows and all((r["kv_tokens"] is not None) == (r["state"] == "booted") for r in rows)
    assert {r["kv_requests"] for r in rows if r["state"] == "booted"} == {39}
    assert all(isinstance(r["kv_tokens"], int) for r in rows if r["state"] == "booted")
