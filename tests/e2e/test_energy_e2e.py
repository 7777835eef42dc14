"""Energy per token on the emulator: each round's results.csv row carries its GPU board energy,
read from the emulated NVML counter of every node around the round, and the figures follow the
emulator's power model (profile [power]: idle watts on every GPU all the time, the busy extra
while its stage steps)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.runs import rows

from pytest_ppsweep.gate.history import History
from pytest_ppsweep.measure.energy import LABEL
from pytest_ppsweep.sim.model.profile import load_profile

GPUS = 32  # the small sweep's 4 nodes x 8 GPUs


def test_energy_per_token_per_layout(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder, reports = sweep_dir(net="127.0.58"), tmp_path / "reports"
    res = pytester.runpytest_subprocess(str(folder), "--ppsweep-reports", str(reports),
                                        "--ppsweep-run-id", "energy", timeout=600)
    assert res.ret == 0, res.stdout.str()[-3000:]
    run = reports / "energy"
    got = rows(run / "results.csv")
    power = load_profile("kimi-k3-6000d").power
    per_layout: dict[str, list[float]] = {}
    for r in got:
        assert r["energy_method"] == "counter" and r["energy_reasons"] == "", r
        joules = float(r["energy_j"])
        tokens = int(r["input_tokens"]) + int(r["output_tokens"])
        assert float(r["energy_j_per_total_token"]) == pytest.approx(joules / tokens, rel=1e-6)
        assert float(r["energy_j_per_request"]) == pytest.approx(
            joules / int(r["completed"]), rel=1e-6)
        # the model: every GPU draws at least idle and at most busy watts over the round
        watts = joules / float(r["duration_s"])
        assert GPUS * power.idle_w * 0.9 < watts < GPUS * power.busy_w, (r["config_id"], watts)
        if (r["concurrency"], r["repeat"]) != ("2", "1"):  # the boot's first round warms up
            per_layout.setdefault(r["config_id"], []).append(
                (float(r["duration_s"]) / tokens, float(r["energy_j_per_total_token"])))
    assert set(per_layout) == {"pp4-tp8-ep4", "pp8-tp4-ep4"}
    # The same work on the same GPUs: a round whose GPUs wait longer per token (idle watts on
    # all of them for longer) costs more J per token, as the model says. An energy that missed
    # the idle waiting (only busy time counted) or a window not cut to the round fails this.
    # Rounds whose time per token is within a few % of each other are within the counter's
    # step (100 ms of modelled time) of each other: compared are the slowest and the fastest
    # round of a layout, when they are 5 % apart.
    for layout, rounds in per_layout.items():
        (t_fast, j_fast), (t_slow, j_slow) = min(rounds), max(rounds)
        if t_slow > 1.05 * t_fast:
            assert j_slow > j_fast, (layout, rounds)

    # ... and every place a layout's figure is shown has it, labelled
    energy = json.loads((run / "answers.json").read_text())["energy"]
    assert energy["label"] == LABEL and energy["schema_version"] == 1
    shown = {(p["point"], p["concurrency"]): p for p in energy["points"]}
    assert set(shown) == {(c, n) for c in per_layout for n in (2, 4)}
    assert all(p["valid"] and p["method"] == "counter" and p["j_per_total_token"] > 0
               for p in shown.values())
    html = (run / "report.html").read_text()
    assert 'id="energy"' in html and LABEL in html
    out = res.stdout.str()
    assert f"Energy per token, medians over rounds ({LABEL})" in out
    table = out[out.index("Energy per token, medians"):]
    assert all(c in table for c in per_layout)
    trend = History(reports).trend("e2e", "energy_per_token")
    assert {(t.config_id, t.concurrency) for t in trend} == set(shown)
    for t in trend:
        assert t.median == pytest.approx(shown[(t.config_id, t.concurrency)]["j_per_total_token"])
