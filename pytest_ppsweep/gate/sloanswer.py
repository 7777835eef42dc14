"""The SLO question: which layout carries the most load, and the most tokens/s per GPU, within
the workload's SLO; from a run folder's ``slo/<layout>.json`` and ``slo_probes.csv``. It lives
beside the gate because it judges with the gate's noise rule, and the gate's SLO check is here.

Each answer is a dict with the decisions' keys (``kind = "slo"``, ``workload``, ``objective``,
``status``, ``answer``, ``fallback``, ``ranking``, ``evidence``, ``rerun``) plus ``slo`` and
``text``. Statuses:

* ``decided``: load: the best layout's highest load within the SLO (confirmed by its repeats)
  is at or above every rival's lowest load outside it, so the brackets cannot overlap;
  tokens/s per GPU: the best beats the next beyond the gate's noise rule (gate/noise.py) over
  their rounds at their final loads;
* ``inconclusive``: brackets that overlap, a final load not confirmed by its repeats, layouts
  that all reached the top of the searched range, or per-GPU figures within noise. ``rerun``
  says what would separate them;
* ``no layout meets the SLO``: no layout was within it even at the lowest load searched;
  ``text`` says how far the closest came (each limit's measured value against it).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ppsweep.gate.noise import noise_pct

__all__ = ["ANSWERS_JSON", "answer_lines", "read_outcomes", "read_probes", "slo_answers",
           "slo_regressions", "write_answers"]  # fmt: skip

ANSWERS_JSON = "answers.json"
KIND = "slo"


def read_probes(run_dir: Path) -> list[dict[str, str]]:
    """``slo_probes.csv`` as rows of strings (empty without one)."""
    path = Path(run_dir) / "slo_probes.csv"
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if None not in r.values()]


def read_outcomes(run_dir: Path) -> list[dict[str, Any]]:
    """Every ``slo/<layout>.json`` of the run folder, in file-name order."""
    folder = Path(run_dir) / "slo"
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("config_id"):
            out.append(data)
    return out


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _at_final(probes: Sequence[Mapping[str, str]], config_id: str, load: float | None,
              key: str) -> list[float]:
    """``key`` of the layout's rounds at its final load that were within the SLO."""
    if load is None:
        return []
    return [v for r in probes if r["config_id"] == config_id and r["within"] == "True"
            and _float(r["load"]) == load and (v := _float(r.get(key))) is not None]


def _entry(out: Mapping[str, Any], probes: Sequence[Mapping[str, str]],
           tps_key: str) -> dict[str, Any]:
    cid, low = str(out["config_id"]), _float(out.get("low"))
    tps = _at_final(probes, cid, low, tps_key)
    cost_key = "usd_per_m_input" if tps_key.startswith("input") else "usd_per_m_output"
    costs = _at_final(probes, cid, low, cost_key)
    return {
        "layout": cid, "gpus": out.get("gpus"), "low": low, "high": _float(out.get("high")),
        "unit": out.get("unit"), "status": out.get("status"),
        "confirmed": bool(out.get("confirmed")), "search": out.get("text"),
        "tps_per_gpu": statistics.median(tps) if tps else None, "tps_per_gpu_rounds": tps,
        "usd_per_m_tokens": statistics.median(costs) if costs else None,
    }


def _how_far(probes: Sequence[Mapping[str, str]], config_id: str) -> str:
    """What the layout's lowest-load probe measured against each limit it broke."""
    mine = [r for r in probes if r["config_id"] == config_id]
    if not mine:
        return f"{config_id}: no probe"
    first = min(mine, key=lambda r: _float(r["load"]) or 0.0)
    unit = "req/s" if first.get("search") == "rate" else "C"
    return f"{config_id} at {first['load']} {unit}: {first['reasons'] or 'outside'}"


def _closest(probes: Sequence[Mapping[str, str]], ids: Sequence[str]) -> str:
    """The layout that came closest at its lowest load: the smallest measured/limit ratio."""
    best, best_ratio = "", math.inf
    for cid in ids:
        mine = [r for r in probes if r["config_id"] == cid]
        if not mine:
            continue
        first = min(mine, key=lambda r: _float(r["load"]) or 0.0)
        ratios = []
        for part in (first.get("reasons") or "").split("; "):
            if "≤" in part and "measured" in part:
                limit = _float(part.split("≤")[1].split("s")[0])
                got = _float(part.split("measured")[1].strip().split(" ")[0])
                if limit and got:
                    ratios.append(got / limit)
        ratio = max(ratios) if ratios else math.inf
        if ratio < best_ratio or not best:
            best, best_ratio = cid, ratio
    if not best:
        return "no probe was measured"
    over = "" if not math.isfinite(best_ratio) else f" ({best_ratio - 1:+.0%} over the limit)"
    return f"closest: {_how_far(probes, best)}{over}"


def _load_answer(workload: str, slo: str, entries: list[dict[str, Any]],
                 probes: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    meeting = sorted((e for e in entries if e["low"] is not None),
                     key=lambda e: (-e["low"], -(e["tps_per_gpu"] or 0.0)))
    others = [e for e in entries if e["low"] is None]
    ranking = [e["layout"] for e in meeting] + [e["layout"] for e in others]
    base = {"kind": KIND, "workload": workload, "slo": slo,
            "objective": "the highest load within the SLO", "ranking": ranking,
            "layouts": entries, "fallback": None, "rerun": None}
    if not meeting:
        far = _closest(probes, [e["layout"] for e in entries])
        return {**base, "status": "no layout meets the SLO", "answer": None,
                "evidence": [_how_far(probes, e["layout"]) for e in entries],
                "text": f"No layout meets {slo} at the lowest load searched; {far}."}
    best = meeting[0]
    evidence, status, why = [], "decided", []
    for rival in meeting[1:]:
        apart = rival["high"] is not None and best["low"] >= rival["high"]
        evidence.append({"layout": best["layout"], "rival": rival["layout"],
                         "best": best["search"], "rival_search": rival["search"],
                         "verdict": "apart" if apart else "overlapping brackets"})
        if not apart:
            status = "inconclusive"
            why.append(f"{rival['layout']}'s bracket overlaps ({rival['search']})")
    if not best["confirmed"]:
        status = "inconclusive"
        why.append(f"{best['layout']}'s final load did not hold on every repeat")
    if best["high"] is None:
        status = "inconclusive" if len(meeting) > 1 and meeting[1]["high"] is None else status
        if status == "inconclusive" and meeting[1]["high"] is None:
            why.append("several layouts reach the top of the searched range")
    fallback = meeting[1]["layout"] if len(meeting) > 1 else None
    text = (f"{best['layout']} carries the most load within {slo}: {best['search']}"
            f"{_per_gpu_text(best)}.")
    rerun = None
    if status == "inconclusive":
        text += " Inconclusive: " + "; ".join(why) + "."
        rerun = ("narrow [workload.slo] precision or raise max_probes/max, then rerun these "
                 f"layouts: --ppsweep-config {','.join(e['layout'] for e in meeting[:2])}")
    return {**base, "status": status, "answer": best["layout"], "fallback": fallback,
            "evidence": evidence, "text": text, "rerun": rerun}


def _per_gpu_text(entry: Mapping[str, Any]) -> str:
    parts = []
    if entry["tps_per_gpu"] is not None:
        parts.append(f"{entry['tps_per_gpu']:,.0f} tok/s per GPU")
    if entry["usd_per_m_tokens"] is not None:
        parts.append(f"${entry['usd_per_m_tokens']:,.3g} per million tokens")
    return f" ({', '.join(parts)})" if parts else ""


def _gpu_answer(workload: str, slo: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    scored = sorted((e for e in entries if e["tps_per_gpu"] is not None and e["confirmed"]),
                    key=lambda e: -e["tps_per_gpu"])
    base = {"kind": KIND, "workload": workload, "slo": slo,
            "objective": "the most tokens/s per GPU within the SLO",
            "ranking": [e["layout"] for e in scored], "layouts": entries, "fallback": None,
            "rerun": None}
    if not scored:
        return {**base, "status": "no layout meets the SLO", "answer": None, "evidence": [],
                "text": f"No layout has a confirmed load within {slo}."}
    best, evidence, status = scored[0], [], "decided"
    for rival in scored[1:]:
        delta = (best["tps_per_gpu"] / rival["tps_per_gpu"] - 1) * 100
        noise = noise_pct(rival["tps_per_gpu_rounds"], best["tps_per_gpu_rounds"])
        beyond = delta > noise
        evidence.append({"layout": best["layout"], "rival": rival["layout"],
                         "delta_pct": round(delta, 2), "noise_pct": round(noise, 2),
                         "verdict": "beyond noise" if beyond else "within noise"})
        if not beyond and rival is scored[1]:
            status = "inconclusive"
    text = f"{best['layout']} gives the most tokens/s per GPU within {slo}{_per_gpu_text(best)}"
    text += f" at {best['search']}."
    rerun = None
    if status == "inconclusive":
        text += f" Inconclusive: {scored[1]['layout']} is within noise."
        rerun = ("more repeats at the final loads: raise [workload] repeats and rerun "
                 f"--ppsweep-config {best['layout']},{scored[1]['layout']}")
    return {**base, "status": status, "answer": best["layout"],
            "fallback": scored[1]["layout"] if len(scored) > 1 else None, "evidence": evidence,
            "text": text, "rerun": rerun}


def slo_answers(run_dir: Path) -> list[dict[str, Any]]:
    """The SLO answers of a run folder, two per workload with an SLO (load, tokens/s per GPU);
    empty when no layout was searched."""
    outcomes, probes = read_outcomes(run_dir), read_probes(run_dir)
    answers = []
    for workload in dict.fromkeys(str(o.get("workload")) for o in outcomes):
        mine = [o for o in outcomes if str(o.get("workload")) == workload]
        slo = str(mine[0].get("slo"))
        decode = any(r["config_id"] == o["config_id"] and (_float(r.get("tpot_p50_s")) or 0) > 0
                     for o in mine for r in probes)
        tps_key = "output_tps_per_gpu" if decode else "input_tps_per_gpu"
        entries = [_entry(o, probes, tps_key) for o in mine]
        answers.append(_load_answer(workload, slo, entries, probes))
        answers.append(_gpu_answer(workload, slo, entries))
    return answers


def write_answers(run_dir: Path, answers: Sequence[Mapping[str, Any]]) -> Path | None:
    """``answers.json``: the SLO answers merged with any other kind already there."""
    if not answers:
        return None
    path = Path(run_dir) / ANSWERS_JSON
    kept: list[Any] = []
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
            kept = [a for a in old.get("answers", []) if a.get("kind") != KIND]
        except (OSError, ValueError, AttributeError):
            kept = []
    path.write_text(json.dumps({"answers": [*kept, *answers]}, indent=2) + "\n",
                    encoding="utf-8")
    return path


def answer_lines(answers: Sequence[Mapping[str, Any]]) -> list[str]:
    """The terminal's SLO answers: one paragraph per answer."""
    lines = []
    for a in answers:
        lines.append(f"SLO [{a['workload']}] {a['objective']}: {a['status']}. {a['text']}")
        if a.get("rerun"):
            lines.append(f"    to decide: {a['rerun']}")
    return lines


def slo_regressions(run_dir: Path, ref_dir: Path, config_id: str | None = None) -> list[str]:
    """Layouts whose highest load within the SLO fell beyond noise against the reference run.

    A fall is beyond noise when this run's bracket lies wholly below the reference's (its
    lowest load outside the SLO at or under the reference's highest load within it) and even
    that smallest possible drop, in %, exceeds the gate's noise rule (gate/noise.py) over the
    two runs' goodput at their final loads; a layout that no longer meets the SLO at all, where
    it did, is a regression too."""
    ref = {o["config_id"]: o for o in read_outcomes(ref_dir)}
    ref_probes, cur_probes = read_probes(ref_dir), read_probes(run_dir)
    bad = []
    for cur in read_outcomes(run_dir):
        cid = str(cur["config_id"])
        if (config_id is not None and cid != config_id) or cid not in ref:
            continue
        was, now_low, now_high = (_float(ref[cid].get("low")), _float(cur.get("low")),
                                  _float(cur.get("high")))
        if was is None:
            continue
        if now_low is None:
            bad.append(f"{cid}: no load within {cur.get('slo')} any more "
                       f"(reference: {ref[cid].get('text')}; now: {cur.get('text')})")
            continue
        if now_high is None or now_high > was:
            continue
        drop = (was - now_high) / was * 100
        noise = noise_pct(_at_final(ref_probes, cid, was, "goodput_rps"),
                          _at_final(cur_probes, cid, now_low, "goodput_rps"))
        if drop > noise:
            bad.append(f"{cid}: highest load within {cur.get('slo')} fell at least "
                       f"{drop:.1f} % (noise {noise:.1f} %): now {cur.get('text')}; "
                       f"reference {ref[cid].get('text')}")
    return bad
