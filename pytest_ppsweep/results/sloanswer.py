"""The SLO question: which layout carries the most load, and the most tokens/s per GPU, within
the workload's SLO; from a run folder's ``slo/<layout>.json`` and ``slo_probes.csv``. One more
kind of question of results/answers.py (its finder is listed in results/finders.py).

Each answer is an :class:`~pytest_ppsweep.results.answers.Answer` of ``kind = "slo"``; its
``extra`` adds ``slo`` (the target), ``text`` (the answer in one sentence) and ``layouts`` (each
layout's search). Statuses:

* ``decided``: load: the best layout's highest load within the SLO (confirmed by its repeats)
  is at or above every rival's lowest load outside it, so the brackets cannot overlap;
  tokens/s per GPU: the best beats the next beyond the gate's noise rule (results/noise.py) over
  their rounds at their final loads;
* ``inconclusive``: brackets that overlap, a final load not confirmed by its repeats, layouts
  that all reached the top of the searched range, or per-GPU figures within noise. ``rerun``
  says what would separate them;
* ``no layout meets the SLO``: no layout was within it even at the lowest load searched;
  ``text`` says how far the closest came (each limit's measured value against it).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ppsweep.folder.runfolder import FolderFiles, FolderSource, RunFolder
from pytest_ppsweep.results.answers import (
    BETTER,
    DECIDED,
    FILE_NAME,
    INCONCLUSIVE,
    ONE_LEVEL_NOTE,
    WITHIN_NOISE,
    Answer,
    AnswerInput,
    Evidence,
    write_answers,
)
from pytest_ppsweep.results.noise import noise_pct

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
        "capacity": out.get("capacity"),  # point, low, high, confidence (results/slocapacity)
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
# The level of the SLO answers' evidence (issue 37 point 4): a layout's probes are judged as one
# level, whatever boots they came from.
LEVEL_TEXT = (f"{ONE_LEVEL_NOTE}: the boot-to-boot noise is not in these brackets (each layout's "
              "probes are judged as rounds of one boot; a rerun that boots again measures it).")
LOAD = "sustainable load"
# Each SLO question's own name (report/answerview.title): two questions, two titles.
MOST_LOAD = "most load"
MOST_PER_GPU = "most tok/s per GPU"


def _load_answer(workload: str, slo: str, entries: list[dict[str, Any]],
                 probes: Sequence[Mapping[str, str]]) -> Answer:
    meeting = sorted((e for e in entries if e["low"] is not None),
                     key=lambda e: (-e["low"], -(e["tps_per_gpu"] or 0.0)))
    others = [e for e in entries if e["low"] is None]
    ranking = tuple(e["layout"] for e in meeting) + tuple(e["layout"] for e in others)
    question = f"which layout carries the most load within {slo}"
    if not meeting:
        ids = [e["layout"] for e in entries]
        far = _closest(probes, ids)
        text = f"No layout meets {slo} at the lowest load searched; {far}."
        return Answer(kind=KIND, workload=workload, question=question, objective=(LOAD,),
                      status=NO_LAYOUT, ranking=ranking,
                      reasons=tuple(_how_far(probes, e["layout"]) for e in entries),
                      extra={"slo": slo, "text": text, "layouts": entries, "aspect": MOST_LOAD,
                             "closest": [d.as_dict() for d in distances(probes, ids)]})
    best = meeting[0]
    evidence, status, why = [], DECIDED, []
    for rival in meeting[1:]:
        apart = rival["high"] is not None and best["low"] >= rival["high"]
        delta = (best["low"] / rival["low"] - 1) * 100 if rival["low"] else math.nan
        evidence.append(Evidence(
            point=best["layout"], versus=rival["layout"], concurrency=0, metric=LOAD,
            delta_pct=delta, noise_pct=math.nan, verdict=BETTER if apart else WITHIN_NOISE,
            note=f"{best['search']} vs {rival['search']}: "
                 + ("the brackets are apart" if apart else "the brackets overlap")))
        if not apart:
            status = INCONCLUSIVE
            why.append(f"{rival['layout']}'s bracket overlaps ({rival['search']})")
    if not best["confirmed"]:
        status = INCONCLUSIVE
        why.append(f"{best['layout']}'s final load did not hold on every repeat")
    text = (f"{best['layout']} carries the most load within {slo}: {best['search']}"
            f"{_per_gpu_text(best)}.")
    rerun = None
    if status == INCONCLUSIVE:
        text += " Inconclusive: " + "; ".join(why) + "."
        rerun = ("narrow [workload.slo] precision or raise max_probes (or max), then rerun "
                 f"--ppsweep-config {','.join(e['layout'] for e in meeting[:2])}")
    return Answer(kind=KIND, workload=workload, question=question, objective=(LOAD,),
                  status=status, answer=best["layout"] if status == DECIDED else None,
                  fallback=meeting[1]["layout"] if len(meeting) > 1 else None, ranking=ranking,
                  evidence=tuple(evidence), rerun=rerun, reasons=(*why, LEVEL_TEXT),
                  extra={"slo": slo, "text": text, "layouts": entries,
                         "best": best["layout"], "aspect": MOST_LOAD})


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
    answers = []
    for workload in dict.fromkeys(str(o.get("workload")) for o in outcomes):
        mine = [o for o in outcomes if str(o.get("workload")) == workload]
        slo = str(mine[0].get("slo"))
        decode = any(r["config_id"] == o["config_id"] and (number(r.get("tpot_p50_s")) or 0) > 0
                     for o in mine for r in probes)
        tps_key = "output_tps_per_gpu" if decode else "input_tps_per_gpu"
        entries = [_entry(o, probes, tps_key) for o in mine]
        answers.append(_load_answer(workload, slo, entries, probes))
        answers.append(_gpu_answer(workload, slo, entries, tps_key))
    return answers


def slo_answers(given: AnswerInput) -> list[Answer]:
    """The finder of the SLO question (results/finders.py)."""
    return answers_of(given.data.run_dir)


def write_if_absent(run_dir: Path, run_id: str) -> Path | None:
    """``answers.json`` with the SLO answers, unless the run's answers were already written
    (the finders write every kind, this one included)."""
    answers = answers_of(run_dir)
    if not answers or (Path(run_dir) / FILE_NAME).is_file():
        return None
    return write_answers(run_dir, run_id, answers)
