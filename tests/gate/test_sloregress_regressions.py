"""The gate's SLO check (gate/sloregress.py): a sustainable load that fell with the SLO's
confidence (the capacity intervals), or beyond noise (the bracket rule, the fallback), fails
it."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from support.slo import fitted
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


def test_the_capacity_intervals_decide_the_gate_where_both_runs_have_them(tmp_path: Path) -> None:
    """Capacity 2.5 req/s in the reference, 2.25 now, 400 judged requests a probe: the ratio's
    upper bound at 95 % is below 1, a regression, although the brackets are adjacent and the
    bracket rule sees at most a 0 % drop. The same probes without the capacity estimate (a
    folder written before it) fall back to the bracket rule, which passes them."""
    ref, cur, old_ref, old_cur = (tmp_path / n for n in ("ref", "cur", "old_ref", "old_cur"))
    fitted(ref, "pp4", 2.5, n=400, bracket=(2.4, 2.6))
    fitted(cur, "pp4", 2.25, n=400, bracket=(2.2, 2.4))
    bad = slo_regressions(cur, ref)
    assert len(bad) == 1 and bad[0].startswith(
        "pp4: capacity within TTFT p50 ≤ 5 s fell 10.0 %, at least "), bad
    assert "with 95% confidence (capacity interval rule: ratio 0.9" in bad[0]
    assert "now 2.25 req/s (0.9 interval" in bad[0]
    assert "reference 2.5 req/s (0.9 interval" in bad[0]
    fitted(old_ref, "pp4", 2.5, n=400, bracket=(2.4, 2.6), with_capacity=False)
    fitted(old_cur, "pp4", 2.25, n=400, bracket=(2.2, 2.4), with_capacity=False)
    assert slo_regressions(old_cur, old_ref) == []
    assert slo_regressions(ref, ref) == []  # unchanged: no regression


def test_a_fall_inside_the_intervals_is_no_regression_and_the_fallback_says_so(
        tmp_path: Path) -> None:
    """Capacities 2.0 then 1.9 req/s from probes of 40 requests: the ratio's interval reaches
    above 1, so the gate passes, although the brackets lie wholly apart by 12.5 % and the
    bracket rule (beyond its noise) fails it. When only the reference has an estimate, the
    bracket rule is used and the message says why."""
    ref, cur, mixed = (tmp_path / n for n in ("ref", "cur", "mixed"))
    fitted(ref, "pp4", 2.0, n=40, bracket=(2.0, 2.2))
    fitted(cur, "pp4", 1.9, n=40, bracket=(1.6, 1.75))
    assert slo_regressions(cur, ref) == []
    fitted(mixed, "pp4", 1.9, n=40, bracket=(1.6, 1.75), with_capacity=False)
    bad = slo_regressions(mixed, ref)
    assert len(bad) == 1 and "fell at least 12.5 %" in bad[0]
    assert "bracket rule: this run has no capacity estimate" in bad[0]


def test_unchanged_capacities_fail_the_gate_at_most_at_the_stated_rate(tmp_path: Path) -> None:
    """A/A: the same true capacity in both runs, each probe's share drawn binomially (200
    requests, ten loads from 0.85 to 1.3 × the crossing), 150 pairs of runs: at most 5 % fail
    (+3 standard errors); a true fall of 5 % fails in most."""
    rng = random.Random(5)
    spread = tuple(0.85 + 0.05 * i for i in range(10))

    def fails(now: float, k: int) -> bool:
        ref, cur = tmp_path / f"ref{k}", tmp_path / f"cur{k}"
        fitted(ref, "pp4", 2.0, spread=spread, rng=rng)
        fitted(cur, "pp4", now, spread=spread, rng=rng)
        return bool(slo_regressions(cur, ref))

    draws = 150
    false = sum(fails(2.0, k) for k in range(draws))
    assert false / draws <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / draws), false
    power = sum(fails(1.9, draws + k) for k in range(50))
    assert power >= 40, power


def _saturating(run: Path, cid: str, rps: float) -> None:
    """The layout's search measured a saturation rate of ``rps`` (run/slo_search.py writes it
    into the outcome)."""
    path = next((run / "slo").glob("*.json"))
    out = json.loads(path.read_text(encoding="utf-8"))
    assert out["config_id"] == cid
    out["saturation_rps"] = rps
    path.write_text(json.dumps(out), encoding="utf-8")


def test_capacities_are_compared_at_most_at_each_runs_saturation(tmp_path: Path) -> None:
    """Fits of 2.5 and 2.25 req/s (a regression uncapped, as above) where both runs saturate at
    2.0 req/s: no open loop carries more than 2.0 in either run, so nothing fell. A current run
    that saturates at 1.5 req/s fell, and the message gives the capped capacity."""
    ref, cur, slower = (tmp_path / n for n in ("ref", "cur", "slower"))
    fitted(ref, "pp4", 2.5, n=400, bracket=(2.4, 2.6))
    fitted(cur, "pp4", 2.25, n=400, bracket=(2.2, 2.4))
    fitted(slower, "pp4", 2.25, n=400, bracket=(2.2, 2.4))
    assert len(slo_regressions(cur, ref)) == 1  # uncapped: the fits differ
    _saturating(ref, "pp4", 2.0)
    _saturating(cur, "pp4", 2.0)
    _saturating(slower, "pp4", 1.5)
    assert slo_regressions(cur, ref) == []
    bad = slo_regressions(slower, ref)
    assert len(bad) == 1 and "fell 25.0 %" in bad[0] and "now 1.5 req/s" in bad[0], bad
