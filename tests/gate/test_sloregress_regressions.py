"""The gate's SLO check (gate/sloregress.py): a sustainable load that fell beyond noise fails it."""

from __future__ import annotations

from pathlib import Path

from support.slo import searched as layout

from pytest_ppsweep.gate.sloregress import slo_regressions


def test_the_gate_fails_a_sustainable_load_that_fell_beyond_noise(tmp_path: Path) -> None:
    ref, same, worse, gone = (tmp_path / n for n in ("ref", "same", "worse", "gone"))
    layout(ref, "pp4", 2.4, 2.6)
    layout(same, "pp4", 2.2, 2.4)  # adjacent brackets: at most a 0 % drop, within noise
    layout(worse, "pp4", 1.6, 1.8)  # wholly below, by ≥ 25 %
    layout(gone, "pp4", None, 0.5, reason="TTFT p50 ≤ 5 s: measured 9 s")
    assert slo_regressions(same, ref) == []
    bad = slo_regressions(worse, ref)
    assert len(bad) == 1
    assert "pp4: highest load within TTFT p50 ≤ 5 s fell at least 25.0 %" in bad[0]
    assert "no load within" in slo_regressions(gone, ref)[0]
    assert slo_regressions(worse, ref, "pp8") == []
