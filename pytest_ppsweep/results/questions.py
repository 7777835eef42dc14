"""The questions a sweep's points ask, found from the points themselves (no syntax of their own):

- a **layout question** per workload: the points that differ only in PP/TP/EP (with an axis
  sweep, those at the comparison baseline's axis values);
- an **axis question** per workload × layout × axis: the points of one layout (as written)
  that differ only in that axis, against the group's baseline value (``[compare] baseline``,
  else the axis's default);
- with axes, a **joint question** per workload: every layout × axis value, the best point
  overall, beside the per-axis answers.

A layout whose point at the baseline values is not valid (an OOM, a failed boot, a failed round)
or was not swept takes part in the layout question with its best valid point at other axis
values, and the answer says so ("stand-in"): a layout is never lost to its baseline value alone.

No question ranks points of different workloads, or an axis's variants as layouts. Each is
ranked by its workload's objective (results/objective.py) through ``results.decide`` with the
sweep's ``[compare] alpha`` and ``min_effect_pct`` (run.json ``compare``; stats/decision.py).
Points that failed N/N, the topology check, the log scan or their boot, and layouts whose
outputs or task score fail their check (results/correctness.py), are excluded with the
reason; a point whose only failure is the spread rule stays a candidate (its repeats carry the
noise, and the decision rule judges it like any other).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.folder.runfolder import CONFIGS_CSV, ExpectKey, PointKey, RunJsonDict, RunKey
from pytest_ppsweep.matrix.expectspec import FAILURES, Expectation, expectation_for
from pytest_ppsweep.results import commands, confound
from pytest_ppsweep.results.aggregate import round_counts
from pytest_ppsweep.results.answers import (
    AS_EXPECTED,
    CLAIMS,
    DECIDED,
    DECIDED_ONE_BOOT,
    EQUIVALENT,
    INCONCLUSIVE,
    MEASURED,
    NO_VALID_POINT,
    SINGLE_BOOT_NOTE,
    TWO_LEVEL_NOTE,
    Answer,
    AnswerInput,
    Evidence,
)
from pytest_ppsweep.results.correctness import PREFIXES as WRONG_ANSWERS
from pytest_ppsweep.results.decide import Decision, best_of, decide, judge, outcome
from pytest_ppsweep.results.objective import (
    PREFILL,
    higher_is_better,
    label,
    workload_objectives,
    workload_texts,
)
from pytest_ppsweep.results.rule import rule_of
from pytest_ppsweep.results.verdict import Verdict, as_bool, records
from pytest_ppsweep.stats.decision import (
    DEFAULT_RULE,
    Levels,
    Rule,
    Sample,
    levels,
    pooled_between,
    sigma_pct,
)
from pytest_ppsweep.stats.power import boots_for, repeats_for
from pytest_ppsweep.stats.spread import DEFAULT_MAX_REPEATS

# A verdict's failures that leave the point a candidate: the spread rule and the repeat count
# (its repeats still feed the noise rule, which then decides or says inconclusive).
_KEPT = ("spread ", )
_REPEATS_SUFFIX = "required"
NOISY_NOTE = "Over the spread limit, kept and judged by the decision rule"
PER_C_NOTE = "Per C"  # the per-C answer's reason starts so (the report shows it)



def expectations_of(raw: RunJsonDict) -> tuple[Expectation, ...]:
    """The failures a run expected (run.json ``expect``: its sweep's ``[[expect]]``)."""
    found = []
    for e in raw.get(RunKey.EXPECT) or ():
        if isinstance(e, dict) and e.get(ExpectKey.FAILURE) in FAILURES:
            found.append(Expectation(failure=str(e[ExpectKey.FAILURE]),
                                     reason=str(e.get(ExpectKey.REASON, "")),
                                     layout=str(e.get(ExpectKey.LAYOUT) or "*"),
                                     axes={str(k): str(v) for k, v in
                                           (e.get(ExpectKey.AXES) or {}).items()}))
    return tuple(found)


def _rule(given: AnswerInput, workload: str) -> Rule:
    """The run's decision rule for ``workload`` (:func:`rule_of`) with, for sequential looks,
    the points in the order they were measured (their first row in results.csv)."""
    rule = rule_of(given.data.run_json, workload)
    if rule.looks == 1:
        return rule
    results = given.data.results
    if "config_id" not in results.columns:
        return rule
    return replace(rule, order=tuple(dict.fromkeys(str(c) for c in results["config_id"])))


def _facts(given: AnswerInput) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for cid in given.summary.order:
        known = given.points.get(cid)
        out[cid] = dict(known) if known else {PointKey.LAYOUT: cid, PointKey.AXES: {},
                                              PointKey.WORKLOAD: ""}
    return out


def _sweep_facts(given: AnswerInput) -> dict[str, dict[str, Any]]:
    """:func:`_facts` of every point of the sweep (run.json ``order``), the points this run
    did not measure (deselected, not reached) included: a question's whole scope."""
    out = {cid: dict(given.points.get(cid) or {PointKey.LAYOUT: cid, PointKey.AXES: {},
                                                PointKey.WORKLOAD: ""})
           for cid in (str(c) for c in given.data.run_json.get(RunKey.ORDER) or ())}
    return {**out, **_facts(given)}


def _expected_why(given: AnswerInput, cid: str, why: str) -> str:
    """``OOM, as expected: <reason>`` when ``cid``'s boot failed the way the run's ``[[expect]]``
    said it would (run.json ``expect``), else ``why`` as it is: an expected failure is
    evidence, shown as expected."""
    raw = given.data.run_json
    expected = expectations_of(raw)
    if not expected or given.data.configs.empty:
        return why
    facts = given.points.get(cid) or {}
    exp = expectation_for(expected, str(facts.get(PointKey.RUNS) or cid),
                          facts.get(PointKey.AXES) or {})
    state = _boot_state(records(given.data.configs, "config_id").get(cid))
    shown = _as_expected(exp, state)
    return f"{shown}: {exp.reason}" if exp is not None and shown else why


def _as_expected(exp: Expectation | None, state: str) -> str:
    """``OOM, as expected`` for a point in boot ``state`` that ``exp`` expected, else ""."""
    if exp is not None and state in ("OOM", "boot failed") and (
            exp.failure != "oom" or state == "OOM"):
        return state + AS_EXPECTED
    return ""


def _excluded(verdicts: Sequence[Verdict], cid: str) -> str:
    """Why ``cid`` is not a candidate ("" when it is): its failures other than the spread rule,
    once each (a failed boot says it all: nothing after it was recorded)."""
    why: dict[str, list[int]] = {}
    for v in verdicts:
        if v.config_id != cid:
            continue
        for f in v.failures:
            if not f.startswith(_KEPT) and not f.endswith(_REPEATS_SUFFIX):
                why.setdefault(f, []).append(v.concurrency)
    boot = [f for f in why if f.startswith(("boot failed", f"no {CONFIGS_CSV} row", "interrupted",
                                            *WRONG_ANSWERS))]
    if boot:
        return boot[0] if len(boot[0]) <= 140 else boot[0][:139] + "…"
    return "; ".join(f"{f} (C={'/'.join(map(str, cs))})" if "C=" not in f else f
                     for f, cs in why.items())


def _noisy(verdicts: Sequence[Verdict], cid: str) -> str:
    """``pp8-tp4-ep4 (C=8 2.5 % > 2.0 %)`` for a candidate over the spread limit, else ""."""
    parts = [f"C={v.concurrency} {f.split(' ', 1)[1]}" for v in verdicts if v.config_id == cid
             for f in (*v.failures, *v.warnings) if f.startswith(_KEPT)]
    return f"{cid} ({', '.join(parts)})" if parts else ""


def _repeats(given: AnswerInput, metrics: Sequence[str]) -> dict[str, dict[str, dict[
        int, list[float]]]]:
    """{metric: {point: {C: values of its valid (N/N) rounds}}}, each a :class:`Sample` that
    names the boot of each value."""
    counted = _counted(given)
    out: dict[str, dict[str, dict[int, list[float]]]] = {m: {} for m in metrics}
    for m in metrics:
        if m not in counted.columns:
            continue
        if f"repeats:{m}" in given.cache:
            out[m] = given.cache[f"repeats:{m}"]
            continue
        values = pd.to_numeric(counted[m], errors="coerce")
        boots = (counted["boot"] if "boot" in counted.columns
                 else pd.Series("", index=counted.index))
        for (cid, conc), part in values.groupby([counted["config_id"], counted["concurrency"]]):
            pairs = [(float(v), str(b) if isinstance(b, str) else "")
                     for v, b in zip(part, boots.loc[part.index], strict=True)
                     if not math.isnan(float(v))]
            # each value with its boot (stats/decision.py: two levels); no boots when any
            # round does not name its boot (a run folder written before the column)
            named = all(b for _, b in pairs)
            out[m].setdefault(str(cid), {})[int(str(conc))] = Sample(
                [v for v, _ in pairs], [b for _, b in pairs] if named else ())
        given.cache[f"repeats:{m}"] = out[m]
    return out


def _concs(given: AnswerInput, workload: str) -> tuple[int, ...]:
    raw = given.data.run_json
    named = raw.get(RunKey.WORKLOADS)
    if isinstance(named, dict) and isinstance(named.get(workload), dict):
        wanted = {int(c) for c in named[workload].get("concurrency") or ()}
        return tuple(c for c in given.summary.concurrencies if c in wanted) or tuple(
            sorted(wanted))
    return given.summary.concurrencies


def _baseline_axes(given: AnswerInput, facts: dict[str, dict[str, Any]]) -> dict[str, str]:
    raw = given.data.run_json
    axes = [str(a) for a in raw.get(RunKey.AXES) or []]
    given_base = raw.get(RunKey.COMPARE_BASELINE)
    chosen: dict[str, Any] = given_base if isinstance(given_base, dict) else {}
    out = {}
    for a in axes:
        if a in ("pp", "tp"):
            continue
        if a in chosen:
            out[a] = json.dumps(chosen[a], sort_keys=True)
            continue
        plain = [f for f in facts.values()
                 if a in (f.get(PointKey.AXES) or {}) and not f.get(PointKey.TAGS)]
        pick = plain or [f for f in facts.values() if a in (f.get(PointKey.AXES) or {})]
        out[a] = json.dumps(pick[0][PointKey.AXES][a], sort_keys=True) if pick else "null"
    return out


def _value(facts: dict[str, Any], axis: str) -> str:
    return json.dumps((facts.get(PointKey.AXES) or {}).get(axis), sort_keys=True)


def rerun_command(given: AnswerInput, points: Sequence[str], repeats: int,
                  boots: int = 1) -> str:
    """The command that measures ``points`` again with ``repeats`` repeats (per boot, on
    ``boots`` boots each), taking everything else over from this run (results/commands.py)."""
    meta = given.data.meta
    return commands.rerun_command(meta.args, points, repeats, boots, given.data.run_dir,
                                  matrix=meta.matrix, clusters=meta.cluster)


def _answer(given: AnswerInput, kind: str, workload: str, question: str,
            objective: tuple[str, ...], members: Sequence[str], verdicts: Sequence[Verdict],
            reps: dict[str, dict[str, dict[int, list[float]]]], concs: Sequence[int],
            scope: Sequence[str] = (), **extra: Any) -> tuple[Answer, Decision]:
    """``scope``: every point of the sweep the question asks about, those this run did not
    measure included (extra ``points``: results/runstatus.qualify names the ones missing)."""
    excluded = [(cid, _expected_why(given, cid, why)) for cid in members
                if (why := _excluded(verdicts, cid))]
    out = {cid for cid, _ in excluded}
    judged = {v.config_id for v in verdicts}
    candidates = [cid for cid in members if cid not in out and cid in judged]
    noisy = [n for cid in candidates if (n := _noisy(verdicts, cid))]
    rule = _run_boots(_history(_rule(given, workload), given.data.run_json, objective[0]),
                      reps.get(objective[0], {}), candidates, concs)
    decision = decide(candidates, objective, reps, concs, rule)
    reasons = list(decision.reasons)
    if noisy:
        reasons.append(f"{NOISY_NOTE}: " + "; ".join(noisy) + ".")
    reasons.append(f"Rule: {rule.text}.")
    boots = _boots(given, candidates)
    if boots:
        extra.setdefault("extra", {})["boots"] = boots
        found = _levels(candidates, reps.get(objective[0], {}), concs)
        if found:
            extra["extra"]["levels"] = found
        reasons.append(_boots_text(boots, found, rule))
    spent = _rounds_spent(candidates, reps.get(objective[0], {}), concs)
    if spent:
        extra.setdefault("extra", {})["rounds"] = spent
        reasons.append("Rounds spent (valid, per C " + "/".join(map(str, concs)) + "): " +
                       "; ".join(f"{cid} " + "/".join(str(by_c.get(str(c), 0)) for c in concs)
                                 for cid, by_c in spent.items()) + ".")
    rerun = None
    if decision.status == INCONCLUSIVE:
        need, why = _repeats_needed(decision, objective[0], reps, concs, rule)
        plan = _boots_needed(given, decision, objective[0], reps, concs, rule)
        boots_n = 1
        if plan is not None:
            (boots_n, rounds_n), why = plan
            extra.setdefault("extra", {})["rerun_plan"] = {"boots": boots_n, "rounds": rounds_n}
            need = rounds_n
        rerun = rerun_command(given, decision.unseparated, need, boots_n)
        reasons.append(f"To separate them ({why}): {rerun}")
    if decision.status == DECIDED_ONE_BOOT:
        # a second boot of the leader and its closest rival measures the boot-to-boot spread
        have = max((len(v) for p in decision.ranking[:2]
                    for v in reps.get(objective[0], {}).get(p, {}).values()), default=3)
        rerun = rerun_command(given, decision.ranking[:2], have, 2)
        reasons.append(f"To check it at the boot level (a second boot of each): {rerun}")
    if decision.status == NO_VALID_POINT and excluded:
        reasons.append("Every point was excluded.")
    if decision.status == MEASURED:
        stored = given.summary.baseline_run  # the baseline's rounds from an earlier run
        extra["extra"] = {"text": decision.reasons[0] + (
            f" Its Δ in the summary is against the stored baseline {given.summary.baseline} "
            f"of run {stored}." if stored and decision.winner != given.summary.baseline
            else "")}
    if decision.status == EQUIVALENT:
        same = decision.unseparated
        pick = _roomiest(given, same)
        extra["extra"] = {"equivalent": list(same), "text": (
            f"{' and '.join(same)} are equivalent within ±{rule.min_effect_pct:g} % on "
            f"{label(objective[0])}" + (f"; fallback by memory headroom: {pick}" if pick else
                                         "; pick by memory headroom or cost") + ".")}
    fallback = (decision.ranking[1] if decision.status in CLAIMS and len(decision.ranking) > 1
                else _roomiest(given, decision.unseparated) if decision.status == EQUIVALENT
                else None)
    per_c = _per_concurrency(members, candidates, verdicts, objective, reps, concs, rule,
                             decision)
    if per_c:
        extra.setdefault("extra", {})["per_c"] = per_c["answers"]
        reasons.append(per_c["text"])
    faster = _faster_excluded(decision, excluded, objective[0], reps, concs)
    if faster:
        extra.setdefault("extra", {})["faster_excluded"] = [cid for cid, _, _ in faster]
    answer = Answer(kind=kind, workload=workload, question=question, objective=objective,
                    status=decision.status, answer=decision.winner, fallback=fallback,
                    ranking=decision.ranking, evidence=decision.evidence, rerun=rerun,
                    reasons=tuple(reasons), excluded=tuple(excluded),
                    caveats=tuple(f"{decision.status} among valid points only: {cid} is "
                                  f"{gain:.0f} % faster on {label(objective[0])} in its valid "
                                  f"rounds but was excluded ({why}): fix it or rerun it"
                                  for cid, gain, why in faster), **extra)
    points = list(dict.fromkeys([*scope, *members]))
    # a trace or shared-prefix workload is named in its answers: what the answer holds for
    holds = workload_texts(given.data.run_json).get(workload)
    if holds:
        answer = replace(answer, extra={**answer.extra, "holds_for": holds})
    return replace(answer, extra={**answer.extra, "points": points}), decision


def _boots(given: AnswerInput, candidates: Sequence[str]) -> dict[str, int]:
    """Per candidate, the boots its valid rounds came from (results.csv ``boot``); empty when
    a candidate's rounds do not say (a run folder written before the column)."""
    results = given.data.results
    if results.empty or "boot" not in results.columns:
        return {}
    counted = _counted(given)
    out = {}
    for cid in candidates:
        ids = {str(b) for b in counted.loc[counted["config_id"] == cid, "boot"]
               if isinstance(b, str) and b}
        if not ids:
            return {}
        out[cid] = len(ids)
    return out


def _levels(candidates: Sequence[str], values: dict[str, dict[int, list[float]]],
            concs: Sequence[int]) -> dict[str, dict[str, float | int]]:
    """Per candidate whose valid rounds come from two boots or more, its variance components on
    the primary metric (stats/decision.levels; the median over the Cs): boots, σ within a boot
    and σ between boots in % (answers.json ``levels``)."""
    out: dict[str, dict[str, float | int]] = {}
    for cid in candidates:
        found = [lv for c in concs if (lv := levels(values.get(cid, {}).get(c, ()))) is not None
                 and lv.two_level]
        if not found:
            continue
        out[cid] = {"boots": max(lv.boots for lv in found),
                    "within_pct": round(_median_sigma(found, "within"), 3),
                    "between_pct": round(_median_sigma(found, "between"), 3)}
    return out


def _median_sigma(found: Sequence[Levels], which: str) -> float:
    known = [sigma_pct(getattr(lv, which)) for lv in found]
    known = [v for v in known if not math.isnan(v)]
    return statistics.median(known) if known else math.nan


def _history(rule: Rule, raw: RunJsonDict, column: str) -> Rule:
    """``rule`` with the boot-to-boot variance that the reports folder's earlier runs of this
    cluster, image and engine measured for ``column`` (run.json ``boot_history``, stored at the
    close: gate/history.boot_noise), when they did. Being measured, it takes precedence over a
    stated prior; this run's own repeated boots take precedence over it (:func:`_run_boots`)."""
    table = raw.get(RunKey.BOOT_HISTORY)
    found = table.get(column) if isinstance(table, dict) else None
    if not isinstance(found, dict):
        return rule
    try:
        var, df = float(found["var"]), float(found["df"])
        configs, runs = int(found["configurations"]), int(found["runs"])
    except (KeyError, TypeError, ValueError):
        return rule
    if not (math.isfinite(var) and var >= 0 and math.isfinite(df) and df > 0):
        return rule
    return replace(rule, boot_var=var, boot_df=df, boot_source=(
        f"the history's earlier runs on this cluster, image and engine ({configs} "
        f"configuration{'s' if configs > 1 else ''} booted once in each of {runs} runs, "
        f"{df:g} degree{'s' if df != 1 else ''} of freedom)"))


def _run_boots(rule: Rule, values: dict[str, dict[int, list[float]]],
               candidates: Sequence[str], concs: Sequence[int]) -> Rule:
    """``rule`` with this run's own boot-to-boot variance when some candidate was measured over
    two boots or more (stats/decision.pooled_between: each point's mean over its Cs, pooled
    over the points with their boots − 1 degrees of freedom); it takes precedence over the
    history's and a stated prior, being measured here."""
    per_point = []
    for cid in candidates:
        found = [lv for c in concs if (lv := levels(values.get(cid, {}).get(c, ()))) is not None
                 and lv.two_level and not math.isnan(lv.between)]
        if found:
            per_point.append(replace(found[0], between=statistics.fmean(
                lv.between for lv in found), boots=min(lv.boots for lv in found)))
    pooled = pooled_between(per_point)
    if pooled is None:
        return rule
    var, df = pooled
    return replace(rule, boot_var=var, boot_df=df, boot_source=(
        f"this run's repeated boots ({len(per_point)} point{'s' if len(per_point) > 1 else ''}, "
        f"{df:g} degree{'s' if df != 1 else ''} of freedom)"))


def _boots_text(boots: dict[str, int], found: dict[str, dict[str, float | int]],
                rule: Rule) -> str:
    """The evidence's level: one boot per point (the boot-to-boot noise is in the intervals
    only when the rule has a source for it), or which points were measured over several boots
    and so compared with the boot as the unit (stats/decision.py: two levels)."""
    source = (f" Single-boot sides take the boot-to-boot σ {sigma_pct(rule.boot_var):.2f} % of "
              f"{rule.boot_source}." if rule.boot_known else "")
    if all(n == 1 for n in boots.values()) or not found:
        if rule.boot_known:
            return (f"{SINGLE_BOOT_NOTE}: each point's rounds come from one boot of its layout;"
                    f"{source[:-1]}, so the boot-to-boot noise is in these intervals.")
        return (f"{SINGLE_BOOT_NOTE}: the boot-to-boot noise is not in these intervals (each "
                "point's rounds come from one boot of its layout; a rerun that boots again "
                "measures it, or state [compare] boot_noise_pct).")
    parts = [f"{cid} {lv['boots']} boots (σ within a boot {lv['within_pct']:.2f} %, between "
             f"boots {lv['between_pct']:.2f} %)" for cid, lv in found.items()]
    single = [cid for cid, n in boots.items() if n == 1]
    return (f"{TWO_LEVEL_NOTE}: {'; '.join(parts)}: their side of each interval takes the boot "
            "as the unit (rounds averaged within each boot)" + (
                f"; {', '.join(single)} single boot: the boot-to-boot noise is not in its side"
                if single and not rule.boot_known else "") + "." + source)


def _rounds_spent(candidates: Sequence[str], values: dict[str, dict[int, list[float]]],
                  concs: Sequence[int]) -> dict[str, dict[str, int]]:
    """Per candidate and C, the valid rounds the decision read (answers.json ``rounds``)."""
    return {cid: {str(c): len(values.get(cid, {}).get(c, ())) for c in concs}
            for cid in candidates}


def _invalid_at(verdicts: Sequence[Verdict], cid: str) -> set[int]:
    """The Cs at which ``cid`` has a failure that excludes it (the spread rule and the repeat
    count leave it a candidate)."""
    return {v.concurrency for v in verdicts if v.config_id == cid and any(
        not f.startswith(_KEPT) and not f.endswith(_REPEATS_SUFFIX) for f in v.failures)}


def _per_concurrency(members: Sequence[str], candidates: Sequence[str],
                     verdicts: Sequence[Verdict], objective: tuple[str, ...],
                     reps: dict[str, dict[str, dict[int, list[float]]]], concs: Sequence[int],
                     rule: Rule, overall: Decision) -> dict[str, Any] | None:
    """The answer per C, when it tells more than the overall one: a point
    invalid at only some Cs is a candidate at the others, and a trade-off (better at one C,
    worse at another) is answered at each C. Each C is decided among the points valid there,
    at α / (number of Cs) (Bonferroni over the Cs, so the per-C answers together keep α).
    None when there is one C, or every C gives the overall answer with the same points."""
    if len(concs) < 2:
        return None
    invalid = {cid: _invalid_at(verdicts, cid) for cid in members}
    booted = {cid for cid in members if cid in candidates or (
        invalid[cid] and not invalid[cid] >= set(concs))}
    partial = sorted(cid for cid in booted if cid not in candidates)
    level = replace(rule, alpha=rule.alpha / len(concs))
    answers: dict[str, dict[str, Any]] = {}
    for c in concs:
        here = [cid for cid in members if cid in booted and c not in invalid[cid]
                and reps.get(objective[0], {}).get(cid, {}).get(c)]
        d = decide(here, objective, reps, [c], level)
        answers[str(c)] = {"status": d.status, "answer": d.winner,
                           "invalid": sorted(cid for cid in booted if c in invalid[cid])}
    winners = {a["answer"] for a in answers.values()}
    if not partial and (winners == {overall.winner} or overall.status in CLAIMS):
        return None
    groups: dict[str, list[str]] = {}
    for conc, a in answers.items():
        key = a["answer"] if a["status"] == DECIDED else a["status"]
        groups.setdefault(str(key), []).append(conc)
    text = f"{PER_C_NOTE} (each C at α / {len(concs)}): " + "; ".join(
        f"{key} at C={', '.join(cs)}" for key, cs in groups.items()) + "."
    for cid in partial:
        text += (f" {cid} is invalid at C={', '.join(str(c) for c in sorted(invalid[cid]))} "
                 "only: it is answered at the other Cs.")
    return {"answers": answers, "text": text}


def _repeats_needed(decision: Decision, metric: str,
                    reps: dict[str, dict[str, dict[int, list[float]]]], concs: Sequence[int],
                    rule: Rule) -> tuple[int, str]:
    """Repeats per point that the rerun needs to separate the unseparated points with 90 %
    power, computed from this run's measured gap (at least ``min_effect_pct``) and per-repeat
    noise, in the question's Holm family; never fewer than one more than measured."""
    values = reps.get(metric, {})
    lead = decision.unseparated[0] if decision.unseparated else None
    have = max((len(v) for p in decision.unseparated for v in values.get(p, {}).values()),
               default=3)
    gaps, sigmas = [], []
    for e in decision.evidence:
        if e.metric != metric or e.point != lead or e.versus not in decision.unseparated:
            continue
        if not math.isnan(e.delta_pct):
            gaps.append(max(abs(e.delta_pct), rule.min_effect_pct))
        for p in (e.point, e.versus):
            logs = [math.log(v) for v in values.get(p, {}).get(e.concurrency, ()) if v > 0]
            if len(logs) >= 2:
                sigmas.append(math.expm1(statistics.stdev(logs)) * 100.0)
    if not gaps or not sigmas:
        return max(2 * have, 5), "twice the repeats: too few to estimate the noise"
    gap, sigma = min(gaps), max(statistics.median(sigmas), 1e-6)
    family = max(1, (len(decision.ranking) - 1) * len(concs))
    need = max(repeats_for(gap, sigma, rule, family), have + 1)
    return need, (f"{need} repeats each give 90 % power for a {gap:.2f} % gap at the measured "
                  f"σ {sigma:.2f} % per repeat")


def _boots_needed(given: AnswerInput, decision: Decision, metric: str,
                  reps: dict[str, dict[str, dict[int, list[float]]]], concs: Sequence[int],
                  rule: Rule) -> tuple[tuple[int, int], str] | None:
    """Boots × rounds per boot per point that the rerun needs for 90 % power, from the
    unseparated points' variance components (stats/power.boots_for), when a point of the run
    measured the spread between boots; None when none did (one boot each: no estimate)."""
    values = reps.get(metric, {})
    found = [lv for p in decision.unseparated for c in concs
             if (lv := levels(values.get(p, {}).get(c, ()))) is not None]
    two = [lv for lv in found if lv.two_level and not math.isnan(lv.between)]
    if not two:
        return None
    lead = decision.unseparated[0]
    gaps = [max(abs(e.delta_pct), rule.min_effect_pct) for e in decision.evidence
            if e.metric == metric and e.point == lead and e.versus in decision.unseparated
            and not math.isnan(e.delta_pct)]
    within = _median_sigma(found, "within")
    between = _median_sigma(two, "between")
    if not gaps or math.isnan(within):
        return None
    gap = min(gaps)
    raw = given.data.run_json
    cap = int(raw.get(RunKey.MAX_REPEATS) or DEFAULT_MAX_REPEATS)
    family = max(1, (len(decision.ranking) - 1) * len(concs))
    k, n = boots_for(gap, within, between, rule, family, max_rounds=cap,
                     boot_cost_rounds=_boot_cost_rounds(given))
    measured = ", ".join(p for p in decision.unseparated if any(
        lv.two_level for c in concs if (lv := levels(values.get(p, {}).get(c, ()))) is not None))
    return (k, n), (
        f"{k} boots × {n} round{'s' if n != 1 else ''} each of "
        f"{', '.join(decision.unseparated)} give 90 % power for a "
        f"{gap:.2f} % gap at the measured σ {within:.2f} % within a boot and {between:.2f} % "
        f"between boots (over the boots of {measured})")


def _boot_cost_rounds(given: AnswerInput) -> float:
    """A boot's cost in rounds (configs.csv ``boot_s`` over results.csv ``duration_s``,
    medians), 10 when either is not known: Kalibera and Jones's c_boot / c_round."""
    configs, results = given.data.configs, given.data.results
    try:
        boot = pd.to_numeric(configs["boot_s"], errors="coerce").dropna()
        took = pd.to_numeric(results["duration_s"], errors="coerce").dropna()
    except KeyError:
        return 10.0
    if boot.empty or took.empty or float(took.median()) <= 0:
        return 10.0
    return max(1.0, float(boot.median()) / float(took.median()))


def _faster_excluded(decision: Decision, excluded: Sequence[tuple[str, str]], metric: str,
                     reps: dict[str, dict[str, dict[int, list[float]]]],
                     concs: Sequence[int]) -> list[tuple[str, float, str]]:
    """Excluded points whose valid rounds are faster than the answer (or the leader) on the
    primary metric, by the mean over the common Cs of the ratio of medians: (point, gain in
    %, why excluded). A failed round is evidence, not a silent exclusion."""
    best = decision.winner or (decision.ranking[0] if decision.ranking else None)
    values = reps.get(metric, {})
    if best is None or best not in values:
        return []
    up = higher_is_better(metric)
    out = []
    for cid, why in excluded:
        ratios = []
        for c in concs:
            mine, theirs = values.get(cid, {}).get(c), values[best].get(c)
            if mine and theirs and statistics.median(theirs) and statistics.median(mine):
                r = statistics.median(mine) / statistics.median(theirs)
                ratios.append(r if up else 1.0 / r)
        if ratios and (gain := (statistics.fmean(ratios) - 1.0) * 100.0) > 0:
            out.append((cid, gain, why))
    return out


def _roomiest(given: AnswerInput, points: Sequence[str]) -> str | None:
    """Among equivalent ``points``, the one with the most memory headroom (configs.csv), or
    None when it is not known for all of them."""
    configs = given.data.configs
    if configs.empty or "mem_headroom_mib" not in configs.columns or len(points) < 2:
        return None
    room = {}
    for cid in points:
        rows = configs[configs["config_id"] == cid]
        value = pd.to_numeric(rows["mem_headroom_mib"], errors="coerce").dropna()
        if value.empty:
            return None
        room[cid] = float(value.iloc[-1])
    return max(points, key=lambda p: room[p])


def _workloads(facts: dict[str, dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(f.get(PointKey.WORKLOAD) or "") for f in facts.values()))


def _stand_ins(given: AnswerInput, facts: dict[str, dict[str, Any]], workload: str,
               base_axes: dict[str, str], members: list[str], objective: Sequence[str],
               reps: dict[str, dict[str, dict[int, list[float]]]],
               concs: Sequence[int]) -> dict[str, tuple[str, str]]:
    """Per layout of ``workload`` whose point at the baseline values is not valid or was not
    swept, its best valid point at other axis values: {baseline point or layout: (stand-in,
    why)}. Only with axes."""
    if not base_axes:
        return {}
    judged = {v.config_id for v in given.verdicts}
    valid = {cid for cid, f in facts.items() if str(f.get(PointKey.WORKLOAD) or "") == workload
             and cid in judged and not _excluded(given.verdicts, cid)}
    by_layout: dict[str, list[str]] = {}
    for cid, f in facts.items():
        if str(f.get(PointKey.WORKLOAD) or "") == workload:
            by_layout.setdefault(str(f.get(PointKey.LAYOUT) or cid), []).append(cid)
    out: dict[str, tuple[str, str]] = {}
    for layout, points in by_layout.items():
        base = next((c for c in points if c in members), None)
        if base is not None and base in valid:
            continue
        alt = best_of([c for c in points if c in valid], objective[0], reps, concs)
        if alt is None:
            continue
        why = ("was not swept" if base is None else
               _excluded(given.verdicts, base) or "was not measured")
        out[base or layout] = (alt, why)
    return out


def layout_answers(given: AnswerInput) -> list[Answer]:
    """One layout question per workload (module docstring)."""
    facts = _facts(given)
    every = _sweep_facts(given)
    base_axes = _baseline_axes(given, facts)
    out: list[Answer] = []
    for w in _workloads(facts):
        members = [cid for cid, f in facts.items() if str(f.get(PointKey.WORKLOAD) or "") == w
                   and all(_value(f, a) == v for a, v in base_axes.items())]
        scope = [cid for cid, f in every.items() if str(f.get(PointKey.WORKLOAD) or "") == w
                 and all(_value(f, a) == v for a, v in base_axes.items())]
        objective = given.objectives.get(w, PREFILL)
        concs = _concs(given, w)
        reps = _repeats(given, objective)
        stand_ins = _stand_ins(given, facts, w, base_axes, members, objective, reps, concs)
        members = [c for c in members if c not in stand_ins] + [
            alt for alt, _why in stand_ins.values()]
        scope = [c for c in scope if c not in stand_ins] + [
            alt for alt, _why in stand_ins.values()]
        # One layout alone asks nothing next to an axis question (it is answered there).
        if not members or (len({facts[c].get(PointKey.LAYOUT) for c in members}) < 2 and base_axes):
            continue
        what = "Which layout" + (f" for workload {w}" if w else "") + (
            " (" + ", ".join(f"{a} = {json.loads(v)}" for a, v in base_axes.items()) + ")"
            if base_axes else "") + f", by {', then '.join(label(m) for m in objective)}?"
        answer, decision = _answer(given, "layout", w, what, objective, members,
                                   given.verdicts, reps, concs, scope)
        caveats = _confounded(given, decision.winner, members)
        caveats += [f"{facts[alt].get(PointKey.LAYOUT) or alt!s} takes part with its best valid "
                    f"point {alt}: at the baseline values its point {base} {why}"
                    for base, (alt, why) in stand_ins.items()]
        if caveats:
            answer = _with(answer, caveats=answer.caveats + tuple(caveats))
        if stand_ins:
            answer = _with(answer, extra={**answer.extra, "stand_ins": {
                base: alt for base, (alt, _why) in stand_ins.items()}})
        out.append(answer)
    return out


def joint_answers(given: AnswerInput) -> list[Answer]:
    """With axes, one joint question per workload: every layout × axis value, ranked as one
    family (module docstring). The per-layout and per-axis answers stay beside it."""
    facts = _facts(given)
    base_axes = _baseline_axes(given, facts)
    if not base_axes:
        return []
    out: list[Answer] = []
    for w in _workloads(facts):
        members = [cid for cid, f in facts.items() if str(f.get(PointKey.WORKLOAD) or "") == w]
        layouts = {facts[c].get(PointKey.LAYOUT) for c in members}
        if len(members) < 2 or len(layouts) < 2:
            continue  # one layout: its axis questions already rank every point
        objective = given.objectives.get(w, PREFILL)
        concs = _concs(given, w)
        reps = _repeats(given, objective)
        what = ("Which point overall, every layout × " + ", ".join(base_axes)
                + (f" for workload {w}" if w else "")
                + f", by {', then '.join(label(m) for m in objective)}?")
        scope = [cid for cid, f in _sweep_facts(given).items()
                 if str(f.get(PointKey.WORKLOAD) or "") == w]
        answer, _ = _answer(given, "joint", w, what, objective, members, given.verdicts,
                            reps, concs, scope)
        out.append(answer)
    return out


def _confounded(given: AnswerInput, winner: str | None, members: Sequence[str]) -> list[str]:
    """Members that differ from the winner in more than the layout (seeds §7: PP16's EP2), by
    the manifests the summary read (a point it has none of: read here)."""
    if winner is None:
        return []
    read = given.summary.manifests

    def manifest_of(cid: str) -> dict[str, Any] | None:
        return read[cid] if cid in read else manifest.load(given.data.run_dir, cid)

    mine = manifest_of(winner)
    out = []
    for cid in members:
        if cid == winner:
            continue
        extra = confound.extra_fields(mine, manifest_of(cid))
        if extra:
            out.append(f"{cid} differs from {winner} in more than the layout ({', '.join(extra)})"
                       ": its comparison is confounded, not a pure PP/TP one.")
    return out


def _with(answer: Answer, **changes: Any) -> Answer:

    return replace(answer, **changes)


def _boot_state(row: dict[str, Any] | None) -> str:
    if row is None:
        return "not run"
    error = str(row.get("boot_error") or "")
    if error == "nan":
        error = ""
    if as_bool(row.get("boot_ok")) is False or error:
        low = error.lower()
        if "out of memory" in low or "outofmemory" in low:
            return "OOM"
        return "not run" if error.startswith("not run") else "boot failed"
    return "booted" if as_bool(row.get("boot_ok")) else "not run"


def axis_answers(given: AnswerInput) -> list[Answer]:
    """One axis question per workload × layout × axis (module docstring), with its table:
    per value the point, whether it booted (or OOM), its headroom and Δ objective vs the
    baseline value."""
    facts = _facts(given)
    base_axes = _baseline_axes(given, facts)
    configs = records(given.data.configs, "config_id") if not given.data.configs.empty else {}
    out: list[Answer] = []
    every = _sweep_facts(given)
    for axis, base_value in base_axes.items():
        groups: dict[tuple[str, str, str], list[str]] = {}
        scopes: dict[tuple[str, str, str], list[str]] = {}
        for into, points in ((groups, facts), (scopes, every)):
            for cid, f in points.items():
                others = json.dumps({k: v for k, v in sorted((f.get(PointKey.AXES) or {}).items())
                                     if k != axis}, sort_keys=True)
                key = (str(f.get(PointKey.WORKLOAD) or ""), str(f.get(PointKey.LAYOUT) or cid),
                       others)
                into.setdefault(key, []).append(cid)
        for (w, layout, others_key), members in groups.items():
            if len(members) < 2:
                continue
            objective = given.objectives.get(w, PREFILL)
            concs = _concs(given, w)
            reps = _repeats(given, objective)
            base = next((c for c in members if _value(facts[c], axis) == base_value), None)
            what = (f"Which {axis} on {layout}" + (f" for workload {w}" if w else "")
                    + f", by {', then '.join(label(m) for m in objective)}?")
            answer, _ = _answer(given, "axis", w, what, objective, members, given.verdicts,
                                reps, concs, scopes.get((w, layout, others_key), ()),
                                layout=layout, axis=axis)
            raw = given.data.run_json
            table, evidence = _axis_table(facts, members, axis, base, objective[0], reps, concs,
                                          configs, answer, _rule(given, w), expectations_of(raw))
            value = (json.loads(_value(facts[answer.answer], axis))
                     if answer.answer else None)
            seen = {(e.point, e.versus, e.concurrency, e.metric) for e in answer.evidence}
            new = tuple(e for e in evidence
                        if (e.point, e.versus, e.concurrency, e.metric) not in seen and
                        (e.versus, e.point, e.concurrency, e.metric) not in seen)
            answer = _with(answer, table=tuple(table), evidence=answer.evidence + new,
                           extra={**answer.extra, "baseline_point": base, "value": value,
                                  "baseline_value": json.loads(base_value)})
            out.append(answer)
    return out


def _axis_table(facts: dict[str, dict[str, Any]], members: Sequence[str], axis: str,
                base: str | None, metric: str,
                reps: dict[str, dict[str, dict[int, list[float]]]], concs: Sequence[int],
                configs: dict[Any, dict[str, Any]], answer: Answer,
                rule: Rule = DEFAULT_RULE, expected: Sequence[Expectation] = ()) -> tuple[
                    list[dict[str, Any]], list[Evidence]]:
    rows, evidence = [], []
    excluded = dict(answer.excluded)
    values = reps.get(metric, {})
    compared = [cid for cid in members if base is not None and cid != base
                and cid not in excluded and base not in excluded]
    # Every value against the baseline value at every C: one Holm family (stats/decision.py).
    judged = judge([(cid, str(base), c, metric, values.get(cid, {}).get(c, ()),
                     values.get(str(base), {}).get(c, ())) for cid in compared for c in concs],
                   rule)
    for cid in members:
        row = configs.get(cid)
        state = _boot_state(row)
        if state == "booted" and cid in excluded:
            state = "invalid"
        why = excluded.get(cid, "")
        exp = expectation_for(expected, str(facts[cid].get(PointKey.RUNS) or cid),
                              facts[cid].get(PointKey.AXES) or {})
        state_shown = _as_expected(exp, state) or state
        if exp is not None and state_shown != state:
            why = f"{state_shown}: {exp.reason}"
        headroom = row.get("mem_headroom_mib") if row else None
        ev = [e for e in judged if e.point == cid]
        evidence += ev
        rows.append({
            "value": json.loads(_value(facts[cid], axis)), "point": cid,
            "runs": facts[cid].get(PointKey.RUNS, ""), "state": state,
            "headroom_mib": None if headroom is None or headroom != headroom else float(
                headroom),
            # the KV cache the engine reported at this value (a memory knob moves it)
            "kv_tokens": _count(row.get("kv_tokens")) if row else None,
            "kv_requests": _count(row.get("kv_requests")) if row else None,
            "delta_pct": {str(e.concurrency): e.delta_pct for e in ev},
            "verdict": "baseline" if cid == base else outcome(ev) if ev else state_shown,
            "why": why,
        })
    return rows, evidence


def _count(value: Any) -> int | None:
    """A configs.csv count cell as an int (None: empty, NaN or absent)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else int(number)


def answer_input(data: Any, summary: Any, verdicts: Sequence[Verdict],
                 command: str = "pytest test_matrix", counts: pd.Series | None = None
                 ) -> AnswerInput:
    """The finders' input from a loaded, summarised and judged run folder; ``counts``: which
    rows of its results count (aggregate.round_counts), when the verdicts computed it."""
    given = AnswerInput(data=data, summary=summary, verdicts=tuple(verdicts),
                        points=confound.points_of(data.run_json),
                        objectives=workload_objectives(data.run_json), command=command)
    if counts is not None:
        given.cache[_COUNTED] = data.results[counts]
    return given


_COUNTED = "counted"


def _counted(given: AnswerInput) -> pd.DataFrame:
    """The results' rows that count (the N/N rule), computed once per input."""
    if _COUNTED not in given.cache:
        results = given.data.results
        given.cache[_COUNTED] = results[round_counts(results)] if not results.empty else results
    counted: pd.DataFrame = given.cache[_COUNTED]
    return counted
