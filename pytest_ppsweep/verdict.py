"""Validity verdicts per configuration x C and the layout recommendation (seed report §10).

A measurement only counts when the service behaved: every request completed, no errors, a clean
log, the requested topology, the server saw the prompt tokens that were sent, and the repeats
agree. Each failed condition is named, so a reader knows why a number is not trusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pytest_ppsweep.aggregate import RunData, Summary

_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f", ""}
_MAX_FINDINGS = 160  # log findings can be long; the full text stays in configs.csv


@dataclass(frozen=True)
class Verdict:
    """Whether the numbers of one configuration at one concurrency can be trusted."""

    config_id: str
    concurrency: int
    valid: bool
    failures: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """``VALID`` or ``INVALID: <failure>; <failure>``."""
        return "VALID" if self.valid else "INVALID: " + "; ".join(self.failures)


def as_bool(value: Any) -> bool | None:
    """CSV truth value: True/False/None (not recorded). Accepts bools, 0/1 and common words."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if isinstance(value, str):
        word = value.strip().lower()
        return True if word in _TRUE else False if word in _FALSE else None
    return bool(value)


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    text = " ".join(str(value).split())
    return text if len(text) <= _MAX_FINDINGS else text[: _MAX_FINDINGS - 1] + "…"


def _pct_pair(value: float, limit: float) -> str:
    # One decimal reads best; two when one decimal would print "2.0 % > 2.0 %".
    digits = 1 if f"{value:.1f}" != f"{limit:.1f}" else 2
    return f"{value:.{digits}f} % > {limit:.{digits}f} %"


def _records(frame: pd.DataFrame, *keys: str) -> dict[Any, dict[str, Any]]:
    # Plain dicts keyed by config id (or id and C): simpler to type and faster than .loc.
    out: dict[Any, dict[str, Any]] = {}
    for record in frame.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        key = tuple(row[k] for k in keys)
        out[key if len(keys) > 1 else key[0]] = row
    return out


def _config_failures(row: dict[str, Any] | None) -> list[str]:
    if row is None:
        return ["no configs.csv row"]
    failures = []
    checks = (("boot_ok", "boot"), ("topology_ok", "topology check"), ("log_clean", "log scan"))
    for column, what in checks:
        state = as_bool(row.get(column))
        if state is None:
            failures.append(f"{what} not recorded")
        elif not state and column == "boot_ok":
            error = _text(row.get("boot_error"))
            failures.append(f"boot failed: {error}" if error else "boot failed")
        elif not state and column == "topology_ok":
            failures.append("topology not as requested")
        elif not state:
            findings = _text(row.get("log_findings"))
            failures.append(f"log scan: {findings}" if findings else "log scan found problems")
    return failures


def _round_failures(rounds: pd.DataFrame) -> list[str]:
    failures = []
    for r in rounds.sort_values("repeat", kind="stable").to_dict("records"):
        rep = r["repeat"]
        # `not ==` rather than `!=` on purpose: a NaN (missing value) must count as broken.
        if not r["completed"] == r["num_requests"]:  # noqa: SIM201
            failures.append(f"{_int(r['completed'])}/{_int(r['num_requests'])} completed "
                            f"in repeat {rep}")
        if not r["failed"] == 0:  # noqa: SIM201
            failures.append(f"{_int(r['failed'])} failed request(s) in repeat {rep}")
        if not r["input_tokens"] == r["input_tokens_nominal"]:  # noqa: SIM201
            failures.append(f"server counted {_int(r['input_tokens'])} prompt tokens, "
                            f"sent {_int(r['input_tokens_nominal'])} in repeat {rep}")
    return failures


def _int(value: Any) -> str:
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "?"


def judge(data: RunData, summary: Summary) -> tuple[Verdict, ...]:
    """One verdict per configuration (sweep order) x concurrency of ``summary``."""
    results, meta = data.results, data.meta
    configs = _records(data.configs, "config_id")
    table = _records(summary.table, "config_id", "concurrency")
    # Only rows that break a per-round rule need a text, so select them once, vectorised.
    broken = results[~((results["completed"] == results["num_requests"])
                       & (results["failed"] == 0)
                       & (results["input_tokens"] == results["input_tokens_nominal"]))]
    broken_groups = {key: frame for key, frame in broken.groupby(["config_id", "concurrency"])}
    limit = meta.spread_threshold * 100.0
    verdicts = []
    for cid in summary.order:
        base = _config_failures(configs.get(cid))
        for conc in summary.concurrencies:
            failures = list(base)
            row = table.get((cid, conc))
            if row is None:
                failures.append(f"no rounds at C={conc}")
            else:
                if (cid, conc) in broken_groups:
                    failures.extend(_round_failures(broken_groups[(cid, conc)]))
                spread = float(row["tps_spread_pct"])
                if spread > limit:
                    failures.append("spread " + _pct_pair(spread, limit))
                if int(row["repeats"]) < meta.min_repeats:
                    failures.append(f"{int(row['repeats'])} repeat(s) < {meta.min_repeats} "
                                    "required")
            verdicts.append(Verdict(cid, conc, not failures, tuple(failures)))
    return tuple(verdicts)


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
    table = _records(summary.table, "config_id", "concurrency")
    configs = _records(summary.configs, "config_id")
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
