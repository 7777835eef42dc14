"""The layout recommendation with its fallback (seed report §10), from the valid points only:
best Input TPS unless a rival is within noise, then TTFT, then memory headroom decide; every reason
is written out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pytest_ppsweep.results.aggregate import Summary
from pytest_ppsweep.results.verdict import Verdict, records


@dataclass(frozen=True)
class Recommendation:
    """The layout to carry forward, its fallback, and why (all derived from the data)."""

    primary: str | None
    fallback: str | None
    ranking: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """One paragraph: the decision followed by the reasons."""
        if self.primary is None:
            head = "No recommendation: no configuration was valid at every concurrency."
        elif self.fallback is None:
            head = f"Use {self.primary}; no fallback (only one layout valid at every C)."
        else:
            head = f"Use {self.primary} as the primary layout; keep {self.fallback} as fallback."
        return " ".join((head, *self.reasons))


@dataclass(frozen=True)
class _Candidate:
    cid: str
    rank: int
    tps: dict[int, float]
    ttft: dict[int, float]
    tps_spread: dict[int, float]
    ttft_spread: dict[int, float]
    headroom: float


def _margin(a: dict[int, float], b: dict[int, float], conc: int) -> float:
    return (a[conc] / b[conc] - 1.0) * 100.0


def _tied(a: _Candidate, b: _Candidate, metric: str) -> bool:
    # "Tied" means every per-C difference is within the run-to-run spread of either layout:
    # the data cannot tell them apart, so the next criterion decides.
    values_a, values_b = getattr(a, metric), getattr(b, metric)
    spread_a, spread_b = getattr(a, metric + "_spread"), getattr(b, metric + "_spread")
    return all(abs(_margin(values_a, values_b, c)) <= max(spread_a[c], spread_b[c], 0.0)
               for c in values_a)


def _score(cands: list[_Candidate], cand: _Candidate, metric: str) -> float:
    # Mean over C of the value relative to the best candidate, so each C weighs the same.
    values = [getattr(cand, metric)[c] / max(getattr(o, metric)[c] for o in cands)
              for c in cand.tps]
    return float(sum(values) / len(values))


def _pick(cands: list[_Candidate]) -> tuple[_Candidate, str]:
    leader = max(cands, key=lambda c: (_score(cands, c, "tps"), -c.rank))
    group = [c for c in cands if c is leader or _tied(c, leader, "tps")]
    if len(group) == 1:
        return leader, "highest Input TPS"
    names = ", ".join(c.cid for c in group if c is not leader)
    fastest = min(group, key=lambda c: (_score(group, c, "ttft"), c.rank))
    group = [c for c in group if c is fastest or _tied(c, fastest, "ttft")]
    if len(group) == 1:
        return fastest, f"Input TPS tied within the measured spread ({names}); lowest TTFT p50"
    roomy = max(group, key=lambda c: (-math.inf if math.isnan(c.headroom) else c.headroom,
                                      -c.rank))
    if sum(1 for c in group if c.headroom == roomy.headroom) == 1:
        return roomy, "Input TPS and TTFT p50 tied within the measured spread; most headroom"
    return min(group, key=lambda c: c.rank), "tied on TPS, TTFT and headroom; first in sweep order"


def _candidates(summary: Summary, valid_ids: list[str]) -> list[_Candidate]:
    table = records(summary.table, "config_id", "concurrency")
    configs = records(summary.configs, "config_id")
    out = []
    for rank, cid in enumerate(valid_ids):
        rows = {c: table.get((cid, c), {}) for c in summary.concurrencies}

        def col(name: str, rows: dict[int, dict[str, Any]] = rows) -> dict[int, float]:
            return {c: float(r.get(name, math.nan)) for c, r in rows.items()}

        headroom = configs.get(cid, {}).get("mem_headroom_mib")
        out.append(_Candidate(cid, rank, col("input_tps"), col("ttft_p50_s"),
                              col("tps_spread_pct"), col("ttft_p50_spread_pct"),
                              math.nan if headroom is None else float(headroom)))
    return out


def _versus(a: _Candidate, b: _Candidate) -> str:
    return "; ".join(f"C={c} Input TPS {_margin(a.tps, b.tps, c):+.2f} %, "
                     f"TTFT p50 {_margin(a.ttft, b.ttft, c):+.2f} %" for c in a.tps)


def _mib(value: float) -> str:
    return "not recorded" if math.isnan(value) else f"{value:,.0f} MiB"


def _memory_reason(best: _Candidate, fallback: _Candidate | None, cands: list[_Candidate]) -> str:
    known = [c for c in cands if not math.isnan(c.headroom)]
    text = f"Worst-rank memory headroom: {best.cid} {_mib(best.headroom)}"
    if fallback is not None:
        text += f" vs {fallback.cid} {_mib(fallback.headroom)}"
        if not math.isnan(best.headroom - fallback.headroom):
            text += f" ({best.headroom - fallback.headroom:+,.0f} MiB)"
    if known:
        most = max(known, key=lambda c: (c.headroom, -c.rank))
        text += ("; the most among valid layouts." if most.headroom == best.headroom
                 else f"; the most among valid layouts is {most.cid} ({_mib(most.headroom)}).")
    return text + ("" if text.endswith(".") else ".")


def recommend(summary: Summary, verdicts: tuple[Verdict, ...] | list[Verdict]) -> Recommendation:
    """Rank the layouts valid at every C by Input TPS (then TTFT p50, then worst-rank headroom,
    each only when the previous criterion is tied within the measured spread)."""
    valid_at: dict[str, set[int]] = {}
    for v in verdicts:
        valid_at.setdefault(v.config_id, set())
        if v.valid:
            valid_at[v.config_id].add(v.concurrency)
    needed = set(summary.concurrencies)
    eligible = [c for c in summary.order if needed and valid_at.get(c, set()) >= needed]
    excluded = tuple(c for c in summary.order if c not in eligible)
    reasons: list[str] = []
    if excluded:
        reasons.append(f"Not eligible (invalid at some C): {', '.join(excluded)}.")
    if not eligible:
        return Recommendation(None, None, (), excluded, tuple(reasons))
    pool = _candidates(summary, eligible)
    ranking: list[_Candidate] = []
    how: list[str] = []
    while pool:
        chosen, why = _pick(pool)
        ranking.append(chosen)
        how.append(why)
        pool = [c for c in pool if c is not chosen]
    best = ranking[0]
    fallback = ranking[1] if len(ranking) > 1 else None
    lead = [f"{best.cid} ranks first of {len(ranking)} layout(s) valid at every C: {how[0]}."]
    # Compare with the baseline only when its own numbers are trusted (valid at every C).
    base = next((c for c in ranking if c.cid == summary.baseline and c is not best), None)
    if base is not None:
        lead.append(f"Versus baseline {base.cid}: {_versus(best, base)}.")
    if fallback is not None:
        lead.append(f"Versus fallback {fallback.cid} (ranked second: {how[1]}): "
                    f"{_versus(best, fallback)}.")
    lead.append(_memory_reason(best, fallback, ranking))
    for conc in summary.concurrencies:
        quickest = best
        for cand in ranking:
            if cand.ttft[conc] < quickest.ttft[conc]:
                quickest = cand
        if quickest is not best and not _tied(quickest, best, "ttft"):
            lead.append(f"Trade-off: {quickest.cid} has lower TTFT p50 at C={conc} "
                        f"({_margin(quickest.ttft, best.ttft, conc):+.2f} %).")
    return Recommendation(best.cid, None if fallback is None else fallback.cid,
                          tuple(c.cid for c in ranking), excluded, tuple(lead + reasons))
