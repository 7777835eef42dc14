"""The history as a source of the boot-to-boot variance: the earlier runs of one sweep, cluster,
image and engine, each one boot of an unchanged configuration (gate/history.boot_noise), stored in
the closing run's run.json before its answers are made (boot_noise_at_close)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from support.runs import Point, record_run, rounds

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.folder.runfolder import RunKey, RunStore
from pytest_ppsweep.gate.history import History, boot_noise_at_close
from pytest_ppsweep.stats.bootnoise import RunMean, between_runs

PP8 = Point("pp8-tp4-ep4", 8, 4, 4, 8, 8800.0, 13.5, 16.4, 0.004)
PP4 = Point("pp4-tp8-ep4", 4, 8, 4, 8, 7150.0, 17.3, 18.6, 0.004)
# each earlier run's boot offset of PP8 and PP4 (a factor on Input TPS)
OFFSETS = {"r1": (1.00, 1.00), "r2": (1.02, 0.99), "r3": (0.985, 1.01), "r4": (1.01, 0.995)}


def _record(root: Path, run_id: str, pp8: float, pp4: float, flags: str = "chunk=8192",
            **meta: object) -> Path:
    points = [Point(PP8.config_id, 8, 4, 4, 8, PP8.input_tps * pp8, 13.5, 16.4, PP8.jitter),
              Point(PP4.config_id, 4, 8, 4, 8, PP4.input_tps * pp4, 17.3, 18.6, PP4.jitter)]
    run = record_run(root, run_id, points)
    for p in points:  # ``flags``: PP8's (PP4 keeps its own)
        manifest.write(run, p.config_id, {
            "image": "local/sglang:test", "layout": p.config_id, "engine": "sglang",
            "flags": flags if p.config_id == PP8.config_id else "chunk=8192"})
    if meta:
        path = run / "metadata" / "run.json"
        path.write_text(json.dumps(json.loads(path.read_text()) | meta))
    return run


def _means(tps: float, jitter: float) -> RunMean:
    logs = [math.log(r["input_tps"]) for r in rounds(
        Point("x", 1, 1, 1, 8, tps, 1.0, 1.0, jitter))]
    return RunMean(statistics.fmean(logs), statistics.variance(logs), len(logs))


def test_earlier_runs_of_one_cluster_image_and_engine_are_pooled(tmp_path: Path) -> None:
    for run_id, (pp8, pp4) in OFFSETS.items():
        _record(tmp_path, run_id, pp8, pp4)
    # not boots of the same configurations: another image, another engine version, a flag
    # changed on PP8 (its own configuration, one run: nothing to pool), a reused copy
    _record(tmp_path, "other-image", 0.90, 1.10, image="local/sglang:new")
    _record(tmp_path, "other-engine", 0.90, 1.10, sglang_version="0.5.1")
    _record(tmp_path, "other-flags", 0.90, 1.00, flags="chunk=4096")
    current = _record(tmp_path, "current", 0.80, 1.20)  # never its own evidence
    found = History(tmp_path).boot_noise(current)
    # "other-flags" ran PP4 unchanged: its PP4 is a fifth boot of that configuration
    want = between_runs({
        PP8.config_id: {8: [_means(PP8.input_tps * OFFSETS[r][0], 0.004) for r in OFFSETS]},
        PP4.config_id: {8: [_means(PP4.input_tps * OFFSETS[r][1], 0.004) for r in OFFSETS]
                        + [_means(PP4.input_tps * 1.00, 0.004)]}})
    assert want is not None and want.var > 0
    tps, runs = found["input_tps"]
    assert tps.var == pytest.approx(want.var) and tps.df == 7 and tps.configurations == 2
    assert runs == 5  # r1-r4 and other-flags
    assert {"input_tps", "ttft_p50_s"} <= set(found)

    # stored in the closing run's run.json, which its answers read
    table, note = boot_noise_at_close(RunStore(tmp_path, "current"))
    stored = json.loads((current / "metadata" / "run.json").read_text())[RunKey.BOOT_HISTORY]
    assert note == "" and stored == table
    assert stored["input_tps"] == {"var": pytest.approx(want.var), "df": 7.0,
                                   "configurations": 2, "runs": 5}


def test_no_earlier_boot_no_source(tmp_path: Path) -> None:
    _record(tmp_path, "r1", 1.0, 1.0)
    current = _record(tmp_path, "current", 1.0, 1.0)
    assert History(tmp_path).boot_noise(current) == {}
    assert boot_noise_at_close(RunStore(tmp_path, "current")) == ({}, "")
    assert RunKey.BOOT_HISTORY not in json.loads((current / "metadata" / "run.json").read_text())


def test_a_point_with_rounds_reused_or_from_two_boots_is_no_boot(tmp_path: Path) -> None:
    for run_id, (pp8, pp4) in OFFSETS.items():
        run = _record(tmp_path, run_id, pp8, pp4)
        if run_id in ("r2", "r3"):  # PP8's rounds copied from another run: no new boot
            results = run / "results.csv"
            text = results.read_text().splitlines()
            header = text[0].split(",")
            col = header.index("reused")
            rows = [line.split(",") for line in text[1:]]
            for r in rows:
                if r[header.index("config_id")] == PP8.config_id:
                    r[col] = "True"
            results.write_text("\n".join([text[0], *(",".join(r) for r in rows)]) + "\n")
    current = _record(tmp_path, "current", 1.0, 1.0)
    tps, _ = History(tmp_path).boot_noise(current)["input_tps"]
    assert tps.df == 3 + 1  # PP4 over four runs, PP8 over two
