"""The SLO question: which layout carries the most load, and the most tokens/s per GPU, within
the workload's SLO; from a run folder's ``slo/<layout>.json`` and ``slo_probes.csv``. One more
kind of question of results/answers.py (its finder is listed in results/finders.py).

Each answer is an :class:`~pytest_ppsweep.results.answers.Answer` of ``kind = "slo"``; its
``extra`` adds ``slo`` (the target), ``text`` (the answer in one sentence) and ``layouts`` (each
layout's search). Statuses:

* ``decided``: load: the best layout's capacity (stats/capacity.py: the load where the
  share of requests over a percentile limit crosses its allowance, fitted over every probe) is
  above every rival's with the SLO's ``confidence``: each ratio best / rival gets an interval
  from the two Fieller intervals (stats/capacity.ratio_interval: MOVER on the log scale), both
  refitted from the probes at ``1 − α/k`` (α = 1 − confidence, k rivals: Bonferroni), and each
  lower end is above 1. Each end of such an interval errs with at most α/(2k); a wrong "best"
  (another layout carries as much or more, ties included, whichever layout the data ranked
  first) needs one of at most 2k such ends to err, so it happens with at most α. The evidence
  names both intervals, the ratio's and the confidence. Tokens/s per GPU: the best beats the
  next beyond the gate's noise rule (stats/gatenoise.py) over their rounds at their final loads;
* ``inconclusive``: load: a ratio interval that reaches down to 1, or a layout without a
  capacity interval (the search's words say why: within the SLO up to the maximum, too few
  probes near the crossing); ``rerun`` says what would narrow the intervals, computed from them:
  the factor of judged requests near each crossing (a Fieller interval narrows as their square
  root), the refine probes, the ``[workload.slo] precision_pct`` and ``max_refine`` that reach
  it. Tokens/s per GPU: per-GPU figures within noise;
* ``no layout meets the SLO``: no layout was within it even at the lowest load searched;
  ``text`` says how far the closest came (each limit's measured value against it);
* ``equivalent`` (load, two layouts only): the ratio's interval (the same one, at 1 − α) lies
  inside ±``[compare] min_effect_pct`` (run.json; default 1 %): they carry the same load within
  that margin (a TOST read off the interval), and the pick is left to tokens/s per GPU or cost.
  With two layouts there is one interval, and every claim read from it (more, or the same within
  the margin) is wrong only when it misses, at most α. With three or more, an equivalence to a
  best chosen from the data would need every pair's interval (Bonferroni over all pairs, not
  over the k rivals), which would cost the decisions above power; so it is not offered there, and
  overlapping intervals stay ``inconclusive``. At the search's default precision (± 10 %) a 1 %
  margin is far out of reach: the rerun says how many more judged requests would show it.

**Fallback: the bracket rule**, for a run folder whose outcomes carry no ``capacity`` (written
before the capacity estimate) or an SLO without a percentile limit (nothing to fit): decided
when the best layout's highest load within the SLO (confirmed by its repeats) is at or above
every rival's lowest load outside it, so the brackets cannot overlap; inconclusive when they
overlap or the best's final load was not confirmed. It states no error rate, and its evidence
and reasons say that it was used and why (``extra["rule"]``: ``capacity interval`` or
``bracket``).

The capacity speaks for the percentile limits only (stats/capacity.py's docstring): the N/N rule,
per-request limits and the client's schedule are judged per probe by the bracket.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.folder.runfolder import FolderFiles, FolderSource, RunFolder
from pytest_ppsweep.matrix.slospec import DEFAULT_CONFIDENCE
from pytest_ppsweep.results import correctness
from pytest_ppsweep.results.accuracy import RunAccuracy
from pytest_ppsweep.results.answers import (
    BETTER,
    DECIDED,
    EQUIVALENT,
    FILE_NAME,
    INCONCLUSIVE,
    NO_VALID_POINT,
    ONE_LEVEL_NOTE,
    WITHIN_NOISE,
    Answer,
    AnswerInput,
    Evidence,
    write_answers,
)
from pytest_ppsweep.results.rule import rule_of
from pytest_ppsweep.results.slocapacity import of_probes, parse_over
from pytest_ppsweep.stats.capacity import WINDOW, Capacity, ratio_interval
from pytest_ppsweep.stats.decision import DEFAULT_MIN_EFFECT_PCT
from pytest_ppsweep.stats.gatenoise import noise_pct

__all__ = ["MOST_LOAD", "MOST_PER_GPU", "NO_LAYOUT", "Distance", "answers_of", "distances",
           "final_values", "number", "over_text", "read_outcomes", "read_probes", "slo_answers",
           "write_if_absent"]  # fmt: skip

KIND = "slo"


def read_probes(run_dir: Path) -> list[dict[str, str]]:
    """``slo_probes.csv`` as rows of strings (empty without one): RunFolder.slo_probes."""
    return RunFolder(run_dir).slo_probes()


def read_outcomes(run_dir: Path) -> list[dict[str, Any]]:
    """Every ``slo/<layout>.json`` of the run folder, in file-name order."""
    return RunFolder(run_dir).slo_outcomes()


def number(value: Any) -> float | None:
    """A finite float from a CSV cell or JSON value, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def final_values(probes: Sequence[Mapping[str, str]], config_id: str, load: float | None,
                 key: str) -> list[float]:
    """``key`` of the layout's rounds at its final load that were within the SLO."""
    if load is None:
        return []
    return [v for r in probes if r["config_id"] == config_id and r["within"] == "True"
            and number(r["load"]) == load and (v := number(r.get(key))) is not None]


def _entry(out: Mapping[str, Any], probes: Sequence[Mapping[str, str]],
           tps_key: str) -> dict[str, Any]:
    cid, low = str(out["config_id"]), number(out.get("low"))
    tps = final_values(probes, cid, low, tps_key)
    cost_key = "usd_per_m_input" if tps_key.startswith("input") else "usd_per_m_output"
    costs = final_values(probes, cid, low, cost_key)
    return {
        "layout": cid, "gpus": out.get("gpus"), "low": low, "high": number(out.get("high")),
        "unit": out.get("unit"), "status": out.get("status"),
        "confirmed": bool(out.get("confirmed")), "search": out.get("text"),
        "capacity": out.get("capacity"),  # point, low, high, confidence (stats/capacity)
        # an outcome written before the capacity estimate has no such key (the bracket rule)
        "interval_known": "capacity" in out, "precision_pct": out.get("precision_pct"),
        "refines": out.get("refines"), "max_refine": out.get("max_refine"),
        # the layout's saturation rate (measure/overload.py): no capacity is above it
        "saturation_rps": number(out.get("saturation_rps")),
        "tps_per_gpu": statistics.median(tps) if tps else None, "tps_per_gpu_rounds": tps,
        "usd_per_m_tokens": statistics.median(costs) if costs else None,
    }


def _how_far(probes: Sequence[Mapping[str, str]], config_id: str) -> str:
    """What the layout's lowest-load probe measured against each limit it broke."""
    mine = [r for r in probes if r["config_id"] == config_id]
    if not mine:
        return f"{config_id}: no probe"
    first = min(mine, key=lambda r: number(r["load"]) or 0.0)
    unit = "req/s" if first.get("search") == "rate" else "C"
    return f"{config_id} at {first['load']} {unit}: {first['reasons'] or 'outside'}"


# A percentile limit a probe broke, as measure/withinslo.py words it: "TTFT p50 ≤ 5 s: measured
# 10.1 s (40 of 40 requests over 5 s; …)" (its words may hold "; ": searched, not split)
_BROKEN = re.compile(r"(?P<what>(?P<metric>[A-Za-z]+) p(?P<pct>\d+)) ≤ "
                     r"(?P<limit>[0-9.eE+-]+) s: (?:unproven: )?measured (?P<got>[0-9.eE+-]+) s")


def _sig(value: float) -> str:
    """A figure of two significant digits (``0.02``, ``5.1``), whole from 10 on (``102``)."""
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2g}"


def over_text(measured_s: float, limit_s: float) -> str:
    """How far over its limit a value is, with the digits it takes never to read ``+0 %``:
    ``0.02 s (+0.4 %) over the limit``."""
    excess = measured_s - limit_s
    pct = (measured_s / limit_s - 1.0) * 100.0 if limit_s else math.inf
    return f"{_sig(excess)} s ({'+' if pct >= 0 else ''}{_sig(pct)} %) over the limit"


@dataclass(frozen=True)
class Distance:
    """How close one layout came to the SLO: its lowest-load probe against the limit it
    broke the most (``measured_s`` from the probe's own column where slo_probes.csv has it,
    else from its reason's text)."""

    layout: str
    load: str
    limit: str  # "TTFT p50 ≤ 5 s"
    measured_s: float
    limit_s: float

    @property
    def ratio(self) -> float:
        return self.measured_s / self.limit_s if self.limit_s else math.inf

    @property
    def text(self) -> str:
        """``pp2-tp16-ep4 at 0.05 req/s: TTFT p50 ≤ 5 s: measured 5.02 s, 0.02 s (+0.4 %)
        over the limit``."""
        return (f"{self.layout} at {self.load}: {self.limit}: measured {self.measured_s:.3g} s, "
                f"{over_text(self.measured_s, self.limit_s)}")

    def as_dict(self) -> dict[str, Any]:
        return {"layout": self.layout, "load": self.load, "limit": self.limit,
                "measured_s": self.measured_s, "limit_s": self.limit_s,
                "text": self.text}


def distances(probes: Sequence[Mapping[str, str]], ids: Sequence[str]) -> list[Distance]:
    """Per layout of ``ids`` with a probe, how close its lowest-load probe came to the limit
    it broke the most; closest first. A layout whose probe broke no limit that has a value
    (only the N/N rule, say) has none."""
    out = []
    for cid in ids:
        mine = [r for r in probes if r["config_id"] == cid]
        if not mine:
            continue
        first = min(mine, key=lambda r: number(r["load"]) or 0.0)
        unit = "req/s" if first.get("search") == "rate" else "C"
        load = f"{first['load']} {unit}" if unit == "req/s" else f"C={first['load']}"
        worst: Distance | None = None
        for found in _BROKEN.finditer(first.get("reasons") or ""):
            limit = number(found["limit"])
            column = f"{found['metric'].lower()}_p{found['pct']}_s"
            got = number(first.get(column)) or number(found["got"])
            if not limit or got is None or got <= limit:
                continue  # not over it (a limit the data could not prove either way)
            d = Distance(cid, load, f"{found['what']} ≤ {found['limit']} s", got, limit)
            if worst is None or d.ratio > worst.ratio:
                worst = d
        if worst is not None:
            out.append(worst)
    return sorted(out, key=lambda d: d.ratio)


def _closest(probes: Sequence[Mapping[str, str]], ids: Sequence[str]) -> str:
    """The layout that came closest at its lowest load: the smallest measured/limit ratio."""
    near = distances(probes, ids)
    if near:
        return f"closest: {near[0].text}"
    tried = [cid for cid in ids if any(r["config_id"] == cid for r in probes)]
    return f"closest: {_how_far(probes, tried[0])}" if tried else "no probe was measured"


NO_LAYOUT = "no layout meets the SLO"
# The level of the SLO answers' evidence: a layout's probes are judged as one
# level, whatever boots they came from.
LEVEL_TEXT = (f"{ONE_LEVEL_NOTE}: the boot-to-boot noise is not in these intervals or brackets "
              "(each layout's probes are judged as rounds of one boot; a rerun that boots again "
              "measures it).")
LOAD = "sustainable load"
# Each SLO question's own name (report/answerview.title): two questions, two titles.
MOST_LOAD = "most load"
MOST_PER_GPU = "most tok/s per GPU"


def _rows_of(probes: Sequence[Mapping[str, str]], config_id: str,
             workload: str) -> list[dict[str, str]]:
    """One layout's slo_probes.csv rows of ``workload`` (a row without the column counts)."""
    return [dict(r) for r in probes if r["config_id"] == config_id
            and (r.get("workload") or workload) == workload]


def _no_interval_why(entry: Mapping[str, Any], level: float) -> str:
    """Why a layout has no capacity interval at ``level``: the search's own words where it gave
    none, else the probes do not bound it at that confidence."""
    if entry.get("capacity") is None:
        said = re.search(r"no capacity estimate \((?P<why>[^)]*)\)", str(entry.get("search")))
        return (f"{entry['layout']} has no capacity estimate"
                + (f" ({said['why']})" if said else ""))
    return (f"{entry['layout']}'s probes do not bound its capacity at {level:.4g} "
            "confidence (the interval is unbounded there)")


def _no_interval_rerun(missing: Mapping[str, Any], best: Mapping[str, Any],
                       rival: Mapping[str, Any]) -> str:
    """What would give ``missing`` a capacity interval, by why it has none."""
    ids = f"--ppsweep-config {best['layout']},{rival['layout']}"
    search = str(missing.get("search"))
    if missing.get("high") is None or "up to the maximum" in search:
        return (f"{missing['layout']} was within the SLO up to the maximum searched "
                f"({missing['low']} {missing.get('unit') or ''}): raise [workload.slo] max above "
                f"it so that its probes cross the limit, then rerun {ids}")
    refine = int(missing.get("max_refine") or 0)
    return (f"more probes near {missing['layout']}'s crossing: raise [workload.slo] max_refine "
            f"(now {refine}; the fit needs three probes at two loads or more within "
            f"×{WINDOW:g} of the crossing), then rerun {ids}")


def _interval_text(cap: Capacity, unit: str) -> str:
    return (f"{cap.point:.4g} {unit} ({cap.confidence:.4g} interval {cap.low:.4g}-"
            f"{cap.high:.4g})")


def _more_text(entry: Mapping[str, Any], cap: Capacity, factor: float) -> str:
    """The refine probes one layout needs to carry ``factor`` × the judged requests near its
    crossing that it has."""
    per = cap.requests / cap.probes if cap.probes else 0.0
    more = max(1, math.ceil(cap.probes * (factor - 1.0)))
    return f"{more} more refine probe(s) of ~{per:.0f} judged requests on {entry['layout']}"


def _separates(best: Mapping[str, Any], rival: Mapping[str, Any], caps: Mapping[str, Capacity],
               at: Mapping[str, Capacity], level: float, ratio: float,
               min_effect_pct: float | None = None) -> str:
    """What would separate ``best`` from ``rival``: the factor of judged requests near the
    crossing both need for the ratio's lower bound at ``level`` to clear 1 (a Fieller interval
    narrows as 1/√requests near the crossing, its dispersion included), in refine probes and in
    [workload.slo] precision_pct (the search's stop, at the SLO's own confidence) and
    max_refine."""
    gap = math.log(ratio)
    b, r = at[best["layout"]], at[rival["layout"]]
    spread = math.hypot(math.log(b.point / b.low), math.log(r.high / r.point))
    ids = f"--ppsweep-config {best['layout']},{rival['layout']}"
    same = ""
    if min_effect_pct is not None and math.log1p(min_effect_pct / 100.0) > abs(gap):
        # equivalence: the whole ratio interval inside ±margin (its wider side counts)
        wide = max(spread, math.hypot(math.log(b.high / b.point), math.log(r.point / r.low)))
        need = (wide / (math.log1p(min_effect_pct / 100.0) - abs(gap))) ** 2
        same = (f"; to show them equivalent within ±{min_effect_pct:g} % instead: about "
                f"×{need:.2g} the judged requests near each crossing")
    if gap <= 0 or spread <= 0:
        return (f"{best['layout']} and {rival['layout']} have capacities "
                f"{abs(ratio - 1) * 100:.1f} % apart: no number of probes would separate "
                f"them at that gap{same}; rerun {ids}")
    factor = (spread / gap) ** 2
    # the search's stop, at the SLO's confidence: the half-width (in log terms) each interval
    # may keep so that the ratio's bound at ``level`` clears 1
    b0, r0 = caps[best["layout"]], caps[rival["layout"]]
    ratio_of_levels = ((math.log(b0.point / b0.low) + math.log(r0.high / r0.point))
                       / (math.log(b.point / b.low) + math.log(r.high / r.point)))
    target = (math.exp(gap / math.sqrt(2.0) * ratio_of_levels) - 1.0) * 100.0
    refine = max(int(best.get("max_refine") or 0), int(rival.get("max_refine") or 0))
    total = max(math.ceil(c.probes * factor) for c in (b0, r0))
    return (f"about ×{factor:.2g} the judged requests near each crossing: "
            f"{_more_text(best, b0, factor)} and {_more_text(rival, r0, factor)}; set "
            f"[workload.slo] precision_pct ≤ {target:.2g} (now "
            f"{best.get('precision_pct') if best.get('precision_pct') is not None else '?'}) and "
            f"max_refine ≥ {max(total, refine)} (now {refine}); more requests per probe "
            f"([workload.slo] requests) help less while a probe's requests are correlated "
            f"(dispersion {max(b0.dispersion, r0.dispersion):.1f}){same}; then rerun {ids}")


def _bracket_evidence(best: Mapping[str, Any], meeting: Sequence[Mapping[str, Any]],
                      why_rule: str) -> tuple[list[Evidence], list[str]]:
    """The bracket rule (the fallback): the best's highest load within the SLO at or above each
    rival's lowest load outside it."""
    evidence, why = [], []
    for rival in meeting:
        if rival is best:
            continue
        apart = rival["high"] is not None and best["low"] >= rival["high"]
        delta = (best["low"] / rival["low"] - 1) * 100 if rival["low"] else math.nan
        evidence.append(Evidence(
            point=best["layout"], versus=rival["layout"], concurrency=0, metric=LOAD,
            delta_pct=delta, noise_pct=math.nan, verdict=BETTER if apart else WITHIN_NOISE,
            note=f"bracket rule ({why_rule}): {best['search']} vs {rival['search']}: "
                 + ("the brackets are apart" if apart else "the brackets overlap")))
        if not apart:
            why.append(f"{rival['layout']}'s bracket overlaps ({rival['search']})")
    if not best["confirmed"]:
        why.append(f"{best['layout']}'s final load did not hold on every repeat")
    return evidence, why


def _load_answer(workload: str, slo: str, entries: list[dict[str, Any]],
                 probes: Sequence[Mapping[str, str]],
                 min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT) -> Answer:
    meeting = [e for e in entries if e["low"] is not None]
    others = [e for e in entries if e["low"] is None]
    question = f"which layout carries the most load within {slo}"
    if not meeting:
        ids = [e["layout"] for e in entries]
        far = _closest(probes, ids)
        text = f"No layout meets {slo} at the lowest load searched; {far}."
        return Answer(kind=KIND, workload=workload, question=question, objective=(LOAD,),
                      status=NO_LAYOUT, ranking=tuple(ids),
                      reasons=tuple(_how_far(probes, e["layout"]) for e in entries),
                      extra={"slo": slo, "text": text, "layouts": entries, "aspect": MOST_LOAD,
                             "closest": [d.as_dict() for d in distances(probes, ids)]})
    rows = {e["layout"]: _rows_of(probes, e["layout"], workload) for e in meeting}
    counted = any(parse_over(r.get("over_limit")) for mine in rows.values() for r in mine)
    known = any(e.get("interval_known") for e in meeting)
    confidence = next((float(e["capacity"]["confidence"]) for e in meeting
                       if isinstance(e.get("capacity"), dict)
                       and number(e["capacity"].get("confidence")) is not None),
                      DEFAULT_CONFIDENCE)
    ceiling = {e["layout"]: e.get("saturation_rps") for e in meeting}
    caps = {cid: c for cid, mine in rows.items()
            if (c := of_probes(mine, confidence, ceiling=ceiling[cid]))}
    interval_rule = known and counted
    # the ranking: by the capacity's estimate where the interval rule holds (its bracket's low
    # end for a layout without one), else by the bracket's low end
    meeting.sort(key=lambda e: (-(caps[e["layout"]].point if interval_rule
                                  and e["layout"] in caps else e["low"]),
                                -(e["tps_per_gpu"] or 0.0)))
    ranking = tuple(e["layout"] for e in meeting) + tuple(e["layout"] for e in others)
    best, rivals = meeting[0], meeting[1:]
    unit = str(best.get("unit") or "")
    rerun = None
    shown: list[str] = []  # how a decided best beats each rival, for the text
    equivalent = ""  # two layouts shown to carry the same load within the margin
    if not interval_rule:
        why_rule = ("this run folder's outcomes carry no capacity interval: written before the "
                    "capacity estimate (stats/capacity.py)" if not known else
                    "the SLO has no percentile limit, so no capacity interval")
        evidence, why = _bracket_evidence(best, meeting, why_rule)
        rule_text = f"The rule: the searches' brackets (no stated error rate), as {why_rule}."
        shown.append(f"on the brackets, as {why_rule}")
        if why:
            rerun = ("narrow [workload.slo] precision or raise max_probes (or max), then rerun "
                     f"--ppsweep-config {','.join(e['layout'] for e in meeting[:2])}")
    else:
        # Bonferroni over the k rivals: each ratio best / rival has a two-sided interval at
        # 1 − α/k (its two capacities' intervals at that level); the best is decided when every
        # lower end is above 1. Whichever layout the data ranked first, and with ties, the
        # chance of naming a best while another carries as much or more is at most α = 1 − the
        # SLO's confidence (module docstring).
        alpha, k = 1.0 - confidence, max(len(rivals), 1)
        level = 1.0 - alpha / k
        at = {cid: c for cid, mine in rows.items() if cid in caps
              and (c := of_probes(mine, confidence, interval_at=level, ceiling=ceiling[cid]))}
        evidence, why = [], []
        margin = 1.0 + min_effect_pct / 100.0
        bound = 1.0 - alpha / (2 * k)  # each end of a two-sided interval at ``level``
        for rival in rivals:
            b, r = at.get(best["layout"]), at.get(rival["layout"])
            if b is None or r is None:
                missing = best if b is None else rival
                note = _no_interval_why(missing, level) + ": not compared on capacity"
                evidence.append(Evidence(
                    point=best["layout"], versus=rival["layout"], concurrency=0, metric=LOAD,
                    delta_pct=math.nan, noise_pct=math.nan, verdict=WITHIN_NOISE, note=note))
                why.append(note)
                if rerun is None:
                    rerun = _no_interval_rerun(missing, best, rival)
                continue
            est, low, high = ratio_interval(b, r)
            apart = low > 1.0
            # two layouts: the one interval also shows them equivalent (module docstring)
            same = not apart and len(rivals) == 1 and 1 / margin < low and high < margin
            evidence.append(Evidence(
                point=best["layout"], versus=rival["layout"], concurrency=0, metric=LOAD,
                delta_pct=(est - 1) * 100, noise_pct=max(est - low, high - est) * 100,
                low_pct=(low - 1) * 100, high_pct=(high - 1) * 100,
                verdict=BETTER if apart else EQUIVALENT if same else WITHIN_NOISE,
                note=(f"capacity {_interval_text(b, unit)} vs {_interval_text(r, unit)}: "
                      f"ratio {est:.4g}, at least {low:.4g} with {bound:.4g} confidence ("
                      + ("above 1: it carries more" if apart else
                         f"{level:.4g} interval {low:.4g}-{high:.4g} within "
                         f"±{min_effect_pct:g} %: equivalent" if same else
                         "not above 1: the intervals do not separate them") + ")")))
            shown.append(f"{rival['layout']} {r.point:.3g} {unit}, ratio {est:.4g} "
                         f"(at least {low:.4g})")
            if same:
                equivalent = (f"{best['layout']} and {rival['layout']} carry the same load "
                              f"within ±{min_effect_pct:g} % with {confidence:.0%} confidence "
                              f"(ratio {est:.4g}, {level:.4g} interval {low:.4g}-{high:.4g})")
            elif not apart:
                why.append(f"{rival['layout']}'s capacity is not below {best['layout']}'s with "
                           f"{confidence:.0%} confidence (ratio {est:.4g}, {level:.4g} interval "
                           f"{low:.4g}-{high:.4g})")
                if rerun is None:
                    rerun = _separates(best, rival, caps, at, level, est,
                                       min_effect_pct if len(rivals) == 1 else None)
        rule_text = (f"The rule: the capacity intervals at {confidence:.0%} confidence over "
                     f"{len(rivals)} rival(s): each ratio best/rival has a {level:.4g} "
                     "interval (Bonferroni over the rivals) whose lower end must be above 1 "
                     "(stats/capacity.py).")
    status = INCONCLUSIVE if why else EQUIVALENT if equivalent else DECIDED
    text = (f"{best['layout']} carries the most load within {slo}: {best['search']}"
            f"{_per_gpu_text(best)}.")
    if status == EQUIVALENT:
        pick = max(meeting, key=lambda e: e["tps_per_gpu"] or 0.0)
        text = (f"Equivalent: {equivalent}; pick by tokens/s per GPU or cost"
                + (f" ({pick['layout']}{_per_gpu_text(pick)})" if pick["tps_per_gpu"] else "")
                + ".")
    elif status == INCONCLUSIVE:
        text += " Inconclusive: " + "; ".join(why) + "."
    elif interval_rule and rivals:
        text += (f" It carries more than every rival with {confidence:.0%} confidence: "
                 + "; ".join(shown) + ".")
    elif rivals:
        text += f" Decided {shown[0]}."
    return Answer(kind=KIND, workload=workload, question=question, objective=(LOAD,),
                  status=status, answer=best["layout"] if status == DECIDED else None,
                  fallback=meeting[1]["layout"] if len(meeting) > 1 else None, ranking=ranking,
                  evidence=tuple(evidence), rerun=rerun, reasons=(*why, rule_text, LEVEL_TEXT),
                  extra={"slo": slo, "text": text, "layouts": entries,
                         "best": best["layout"], "aspect": MOST_LOAD,
                         "rule": "capacity interval" if interval_rule else "bracket",
                         **({"equivalent": [e["layout"] for e in meeting]}
                            if status == EQUIVALENT else {})})


def _per_gpu_text(entry: Mapping[str, Any]) -> str:
    parts = []
    if entry["tps_per_gpu"] is not None:
        parts.append(f"{entry['tps_per_gpu']:,.0f} tok/s per GPU")
    if entry["usd_per_m_tokens"] is not None:
        parts.append(f"${entry['usd_per_m_tokens']:,.3g} per million tokens")
    return f" ({', '.join(parts)})" if parts else ""


def _gpu_answer(workload: str, slo: str, entries: list[dict[str, Any]],
                metric: str) -> Answer:
    scored = sorted((e for e in entries if e["tps_per_gpu"] is not None and e["confirmed"]),
                    key=lambda e: -e["tps_per_gpu"])
    question = f"which layout gives the most tokens/s per GPU within {slo}"
    ranking = tuple(e["layout"] for e in scored)
    if not scored:
        return Answer(kind=KIND, workload=workload, question=question, objective=(metric,),
                      status=NO_LAYOUT, extra={"slo": slo, "layouts": entries,
                                               "aspect": MOST_PER_GPU,
                                               "text": f"No layout has a confirmed load "
                                                       f"within {slo}."})
    best, evidence, status = scored[0], [], DECIDED
    for rival in scored[1:]:
        delta = (best["tps_per_gpu"] / rival["tps_per_gpu"] - 1) * 100
        noise = noise_pct(rival["tps_per_gpu_rounds"], best["tps_per_gpu_rounds"])
        beyond = delta > noise
        evidence.append(Evidence(
            point=best["layout"], versus=rival["layout"], concurrency=0, metric=metric,
            delta_pct=delta, noise_pct=noise, verdict=BETTER if beyond else WITHIN_NOISE,
            repeats=(len(best["tps_per_gpu_rounds"]), len(rival["tps_per_gpu_rounds"])),
            note="each at its highest load within the SLO"))
        if not beyond and rival is scored[1]:
            status = INCONCLUSIVE
    text = (f"{best['layout']} gives the most tokens/s per GPU within {slo}"
            f"{_per_gpu_text(best)} at {best['search']}.")
    rerun = None
    if status == INCONCLUSIVE:
        text += f" Inconclusive: {scored[1]['layout']} is within noise."
        rerun = ("more repeats at the final loads: raise [workload] repeats and rerun "
                 f"--ppsweep-config {best['layout']},{scored[1]['layout']}")
    return Answer(kind=KIND, workload=workload, question=question, objective=(metric,),
                  status=status, answer=best["layout"] if status == DECIDED else None,
                  fallback=scored[1]["layout"] if len(scored) > 1 else None, ranking=ranking,
                  evidence=tuple(evidence), rerun=rerun, reasons=(LEVEL_TEXT,),
                  extra={"slo": slo, "text": text, "layouts": entries,
                         "best": best["layout"], "aspect": MOST_PER_GPU})


def answers_of(source: FolderSource) -> list[Answer]:
    """The SLO answers of a run folder's files (read already, or read here), two per workload
    with an SLO (the most load, the most tokens/s per GPU); empty when no layout was
    searched."""
    files = FolderFiles.of(source)
    outcomes, probes = files.outcomes, files.probes
    # a layout that computes wrong answers carries no load worth naming (results/correctness)
    wrong = correctness.failures(files.dir, dict.fromkeys(str(o.get("config_id"))
                                                          for o in outcomes),
                                 RunAccuracy.of_files(files)) if outcomes else {}
    answers = []
    for workload in dict.fromkeys(str(o.get("workload")) for o in outcomes):
        every = [o for o in outcomes if str(o.get("workload")) == workload]
        mine = [o for o in every if str(o.get("config_id")) not in wrong]
        out = tuple((c, wrong[c]) for c in dict.fromkeys(str(o.get("config_id")) for o in every)
                    if c in wrong)
        if not mine:
            slo = str(every[0].get("slo"))
            answers.append(Answer(
                kind=KIND, workload=workload, objective=(LOAD,), status=NO_VALID_POINT,
                question=f"which layout carries the most load within {slo}", excluded=out,
                reasons=("Every layout was excluded.",),
                extra={"slo": slo, "aspect": MOST_LOAD, "text": "Every layout was excluded: "
                       + "; ".join(f"{c}: {why}" for c, why in out)}))
            continue
        slo = str(mine[0].get("slo"))
        decode = any(r["config_id"] == o["config_id"] and (number(r.get("tpot_p50_s")) or 0) > 0
                     for o in mine for r in probes)
        tps_key = "output_tps_per_gpu" if decode else "input_tps_per_gpu"
        entries = [_entry(o, probes, tps_key) for o in mine]
        found = [_load_answer(workload, slo, entries, probes,
                              rule_of(files.meta, workload).min_effect_pct),
                 _gpu_answer(workload, slo, entries, tps_key)]
        answers += [replace(a, excluded=a.excluded + out) if out else a for a in found]
    return answers


def slo_answers(given: AnswerInput) -> list[Answer]:
    """The finder of the SLO question (results/finders.py)."""
    return answers_of(given.data.files or given.data.run_dir)


def write_if_absent(run_dir: Path, run_id: str) -> Path | None:
    """``answers.json`` with the SLO answers, unless the run's answers were already written
    (the finders write every kind, this one included)."""
    answers = answers_of(run_dir)
    if not answers or (Path(run_dir) / FILE_NAME).is_file():
        return None
    return write_answers(run_dir, run_id, answers)
