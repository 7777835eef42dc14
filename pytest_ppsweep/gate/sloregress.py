"""The gate's SLO check: a layout whose sustainable load within the SLO fell against the
reference run, with the SLO's confidence (the searches' outcomes and probes,
results/sloanswer.py; the capacity estimate, stats/capacity.py).

Two rules, and each message says which one it used:

* **capacity interval** (both runs' outcomes carry a capacity estimate, each refitted from its
  own probes at one level and capped at that run's saturation rate, measure/overload.py): the
  ratio current / reference of the two capacities gets an
  interval from the two Fieller intervals (:func:`~pytest_ppsweep.stats.capacity.
  ratio_interval`, MOVER on the log scale). It is a regression when the ratio's upper bound,
  one-sided at the current SLO's ``confidence``, is below 1 (the two intervals are fitted at
  ``2 × confidence − 1`` two-sided, so each end holds at ``confidence``): the chance that an
  unchanged capacity is called a regression is at most 1 − confidence per layout. The gate has
  no threshold for a load (its thresholds are per metric of results.csv, gate/comparison.py); as
  a metric gated with none (a 0 % threshold) it fails on significance alone, and so does this;
* **bracket** (the fallback: either run's outcome has no capacity estimate, e.g. a run folder
  written before it, or an SLO without a percentile limit): this run's bracket lies wholly below
  the reference's (its lowest load outside the SLO at or under the reference's highest load
  within it) and even that smallest possible drop, in %, exceeds the gate's noise rule
  (stats/gatenoise.py) over the two runs' goodput at their final loads.

Either way, a layout that no longer meets the SLO at all, where it did, is a regression."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ppsweep.matrix.slospec import DEFAULT_CONFIDENCE
from pytest_ppsweep.results.sloanswer import final_values, number, read_outcomes, read_probes
from pytest_ppsweep.results.slocapacity import of_probes
from pytest_ppsweep.stats.capacity import Capacity, ratio_interval
from pytest_ppsweep.stats.gatenoise import noise_pct

__all__ = ["slo_regressions"]


def _confidence(outcome: Mapping[str, Any]) -> float:
    cap = outcome.get("capacity")
    found = number(cap.get("confidence")) if isinstance(cap, dict) else None
    return found if found is not None else DEFAULT_CONFIDENCE


def _rows(probes: Sequence[Mapping[str, str]],
          outcome: Mapping[str, Any]) -> list[dict[str, str]]:
    cid, workload = str(outcome["config_id"]), str(outcome.get("workload") or "default")
    return [dict(r) for r in probes if r["config_id"] == cid
            and (r.get("workload") or workload) == workload]


def _capacities(cur: Mapping[str, Any], ref: Mapping[str, Any],
                cur_probes: Sequence[Mapping[str, str]],
                ref_probes: Sequence[Mapping[str, str]]) -> tuple[Capacity, Capacity] | None:
    """Both runs' capacities with their intervals at ``2 × confidence − 1`` (the current SLO's
    confidence), each refitted from its own probes and capped at its own run's saturation rate
    where the search measured one (results/slocapacity.capped, as the answer caps it: a fit
    between a probe under saturation and one over it can land far above what any open loop
    carries, and two such fits would be compared as if both loads were sustainable); None when
    either has none."""
    if not isinstance(cur.get("capacity"), dict) or not isinstance(ref.get("capacity"), dict):
        return None
    conf = _confidence(cur)
    level = 2.0 * conf - 1.0
    now = of_probes(_rows(cur_probes, cur), _confidence(cur), interval_at=level,
                    ceiling=number(cur.get("saturation_rps")))
    was = of_probes(_rows(ref_probes, ref), _confidence(ref), interval_at=level,
                    ceiling=number(ref.get("saturation_rps")))
    return None if now is None or was is None else (now, was)


def slo_regressions(run_dir: Path, ref_dir: Path, config_id: str | None = None) -> list[str]:
    """Layouts whose sustainable load within the SLO fell against the reference run (the
    module's two rules), one message each."""
    ref = {o["config_id"]: o for o in read_outcomes(ref_dir)}
    ref_probes, cur_probes = read_probes(ref_dir), read_probes(run_dir)
    bad = []
    for cur in read_outcomes(run_dir):
        cid = str(cur["config_id"])
        if (config_id is not None and cid != config_id) or cid not in ref:
            continue
        was, now_low, now_high = (number(ref[cid].get("low")), number(cur.get("low")),
                                  number(cur.get("high")))
        if was is None:
            continue
        if now_low is None:
            bad.append(f"{cid}: no load within {cur.get('slo')} any more "
                       f"(reference: {ref[cid].get('text')}; now: {cur.get('text')})")
            continue
        caps = _capacities(cur, ref[cid], cur_probes, ref_probes)
        if caps is not None:
            now, before = caps
            est, _, high = ratio_interval(now, before)
            conf = _confidence(cur)
            if high < 1.0:
                unit = str(cur.get("unit") or "")
                bad.append(
                    f"{cid}: capacity within {cur.get('slo')} fell {(1 - est) * 100:.1f} %, "
                    f"at least {(1 - high) * 100:.1f} % with {conf:.0%} confidence (capacity "
                    f"interval rule: ratio {est:.3g}, upper bound {high:.3g}): now "
                    f"{now.point:.3g} {unit} ({now.confidence:.3g} interval {now.low:.3g}-"
                    f"{now.high:.3g}), reference {before.point:.3g} {unit} "
                    f"({before.confidence:.3g} interval {before.low:.3g}-{before.high:.3g})")
            continue
        if now_high is None or now_high > was:
            continue
        drop = (was - now_high) / was * 100
        noise = noise_pct(final_values(ref_probes, cid, was, "goodput_rps"),
                          final_values(cur_probes, cid, now_low, "goodput_rps"))
        if drop > noise:
            why = ("this run has no capacity estimate" if not isinstance(cur.get("capacity"), dict)
                   else "the reference run has no capacity estimate"
                   if not isinstance(ref[cid].get("capacity"), dict)
                   else "the probes do not bound a capacity to compare")
            bad.append(f"{cid}: highest load within {cur.get('slo')} fell at least "
                       f"{drop:.1f} % (noise {noise:.1f} %; bracket rule: {why}): now "
                       f"{cur.get('text')}; reference {ref[cid].get('text')}")
    return bad
