"""The gate's SLO check: a layout whose highest load within the SLO fell beyond noise against
the reference run (the searches' outcomes and probes, results/sloanswer.py)."""

from __future__ import annotations

from pathlib import Path

from pytest_ppsweep.results.noise import noise_pct
from pytest_ppsweep.results.sloanswer import final_values, number, read_outcomes, read_probes

__all__ = ["slo_regressions"]


def slo_regressions(run_dir: Path, ref_dir: Path, config_id: str | None = None) -> list[str]:
    """Layouts whose highest load within the SLO fell beyond noise against the reference run.

    A fall is beyond noise when this run's bracket lies wholly below the reference's (its
    lowest load outside the SLO at or under the reference's highest load within it) and even
    that smallest possible drop, in %, exceeds the gate's noise rule (results/noise.py) over the
    two runs' goodput at their final loads; a layout that no longer meets the SLO at all, where
    it did, is a regression too."""
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
        if now_high is None or now_high > was:
            continue
        drop = (was - now_high) / was * 100
        noise = noise_pct(final_values(ref_probes, cid, was, "goodput_rps"),
                          final_values(cur_probes, cid, now_low, "goodput_rps"))
        if drop > noise:
            bad.append(f"{cid}: highest load within {cur.get('slo')} fell at least "
                       f"{drop:.1f} % (noise {noise:.1f} %): now {cur.get('text')}; "
                       f"reference {ref[cid].get('text')}")
    return bad
