"""When no layout meets the SLO, what would: the changes the planner's model
predicts to meet a TTFT limit, each with its 90 % interval, or why the model cannot say.

A layout that misses the SLO at the lowest rate searched may still meet it at a lower rate, but
never below its *floor*: one request at a time, with an empty queue, its TTFT is the prefill of
one prompt. The planner's cost model (planner/fitting.py) predicts that floor for every layout
the cluster can run (PP x TP = its GPUs) and every chunk size, at the workload's own input
length. A change *would meet* the limit when the upper end of its 90 % interval is within it,
and *might* when only the lower end is. The model is the run's fitted profile
(``planner/profile.json``, from ``python -m pytest_ppsweep fit``) or, without one, a fit on this
run's own measured rounds; a fit that misses its own points (planner/trust.py) says nothing.

The model predicts TTFT (p50, p95) of prefill rounds only: any other limit, or a decode workload,
is named as one it cannot speak for.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pytest_ppsweep.folder.runfolder import (
    PLANNER_PROFILE_JSON,
    FolderFiles,
    FolderSource,
    RunJsonDict,
    RunKey,
)
from pytest_ppsweep.planner.data import PlannerError, load_measured
from pytest_ppsweep.planner.fitting import Fitted, fit, load_fitted
from pytest_ppsweep.planner.plan import cluster_layouts
from pytest_ppsweep.planner.trust import fit_trust

__all__ = ["CHUNKS", "Reach", "reach", "terminal_lines"]

CHUNKS = (2048, 4096, 8192, 16384)  # chunked_prefill_size values tried beside the run's own
_MODELLED: dict[tuple[str, Any], str] = {("ttft", 50): "ttft_p50_s", ("ttft", 95): "ttft_p95_s"}
_SHOWN = 5


@dataclass(frozen=True)
class Candidate:
    """One change and its predicted TTFT floor (90 % interval)."""

    pp: int
    tp: int
    chunk: int
    value: float
    lo: float
    hi: float
    verdict: str  # "would meet" / "might meet"
    measured: bool = False  # this layout at this chunk size was booted in the run

    def text(self, limit: str) -> str:
        return (f"pp{self.pp}-tp{self.tp} at chunked_prefill_size {self.chunk}: {limit} one "
                f"request at a time {self.value:.2f} s (90 % interval {self.lo:.2f}-"
                f"{self.hi:.2f} s): {self.verdict}"
                + ("" if self.measured else " (predicted: never measured)"))


@dataclass(frozen=True)
class Reach:
    """The what-if of one SLO that no layout met: the lines to show (empty: nothing to say)."""

    lines: tuple[str, ...]


def _workload(meta: RunJsonDict, name: str) -> dict[str, Any]:
    named = meta.get(RunKey.WORKLOADS)
    if isinstance(named, dict) and isinstance(named.get(name), dict):
        return dict(named[name])
    return dict(meta.get(RunKey.WORKLOAD) or {})


def _model(files: FolderFiles) -> tuple[Fitted | None, str]:
    """The fitted profile and where it came from, or None and why not."""
    path = files.dir / PLANNER_PROFILE_JSON
    try:
        if path.is_file():
            fitted, source = load_fitted(path), f"the fitted profile {PLANNER_PROFILE_JSON}"
        else:
            fitted = fit(load_measured([files.dir]))
            source = "a fit on this run's measured rounds"
    except (PlannerError, OSError, ValueError, KeyError) as exc:
        return None, f"no model to ask ({exc})"
    trust = fit_trust(fitted)
    if not trust.trusted:
        return None, f"{source} does not reproduce its own points ({trust.summary()})"
    return fitted, source


def reach(source: FolderSource) -> list[Reach]:
    """Per SLO that no layout met (every search found nothing within from its minimum), what
    would meet it; [] when some layout met its SLO or there was no search."""
    files = FolderFiles.of(source)
    missed: dict[str, list[dict[str, Any]]] = {}
    for o in files.outcomes:
        missed.setdefault(str(o.get("workload") or "default"), []).append(o)
    out = []
    for name, outcomes in missed.items():
        if any(o.get("low") is not None for o in outcomes):
            continue
        workload = _workload(files.meta, name)
        slo = workload.get("slo") or {}
        limits = [lim for lim in slo.get("limits") or () if isinstance(lim, dict)]
        text = str(outcomes[0].get("slo") or "the SLO")
        floor = min(float(o.get("min") or 0) for o in outcomes)
        since = f"from {floor:g} req/s up" if floor > 0 else "at the loads searched"
        below = f"below {floor:g} req/s" if floor > 0 else "at a lower rate"
        lines = [f"No layout meets {text} (workload {name}) {since}. What would meet it:",
                 f"  {below} (not measured) a layout reaches at best its TTFT floor, one "
                 "request at a time with an empty queue"]
        modelled = [(lim, _MODELLED.get((str(lim.get("metric")), lim.get("percentile"))))
                    for lim in limits]
        unknown = [lim for lim, key in modelled if key is None]
        if unknown or int(workload.get("output_len") or 1) > 1:
            names = ", ".join(f"{lim.get('metric')} p{lim.get('percentile')}"
                              if lim.get("percentile") else f"{lim.get('metric')} per request"
                              for lim in unknown) or "a decode workload"
            lines.append(f"  the model cannot say: it predicts TTFT p50/p95 of prefill rounds, "
                         f"not {names}")
            out.append(Reach(tuple(lines)))
            continue
        fitted, why = _model(files)
        if fitted is None:
            lines.append(f"  the model cannot say: {why}")
            out.append(Reach(tuple(lines)))
            continue
        booted = {(int(o.get("pp") or 0), int(o.get("tp") or 0)) for o in outcomes}
        lines += _candidates(fitted, why, [(lim, key) for lim, key in modelled if key],
                             int(workload.get("input_len") or 16384),
                             int(workload.get("num_requests") or 40), booted)
        out.append(Reach(tuple(lines)))
    return out


def _candidates(fitted: Fitted, source: str, limits: list[tuple[dict[str, Any], str | None]],
                input_len: int, num_requests: int,
                booted: set[tuple[int, int]] | None = None) -> list[str]:
    gpus = int(fitted.hardware.gpus)
    num_layers = int(getattr(fitted.hardware, "num_layers", 61))
    chunks = sorted({fitted.chunk, *CHUNKS})
    found: list[Candidate] = []
    best: Candidate | None = None
    for pp, tp in dict.fromkeys((pp, tp) for pp, tp, _ in cluster_layouts(gpus, num_layers)):
        for chunk in chunks:
            pred = replace(fitted, chunk=chunk).predict(pp, tp, 1, input_len, num_requests)
            verdicts = []
            band = pred.ttft_p50_s
            for lim, key in limits:
                band = getattr(pred, str(key))
                limit = float(lim.get("limit_s") or 0)
                verdicts.append("would meet" if band.hi <= limit else
                                "might meet" if band.lo <= limit else "misses")
            cand = Candidate(pp, tp, chunk, band.value, band.lo, band.hi,
                             "might meet" if "might meet" in verdicts else verdicts[0],
                             (pp, tp) in (booted or set()) and chunk == fitted.chunk)
            if best is None or cand.value < best.value:
                best = cand
            if "misses" not in verdicts:
                found.append(cand)
    label = " and ".join(f"TTFT p{lim.get('percentile')}" for lim, _ in limits)
    head = (f"  the floors predicted by {source}, at {input_len}-token prompts: each holds at "
            "zero load only (one request at a time, an empty queue; any load adds the queue's "
            "wait), and a layout or chunk size this run never booted is a prediction:")
    if not found:
        assert best is not None
        return [head, f"  no layout or chunk size would meet it even one request at a time; "
                      f"the closest: {best.text(label)}. The SLO needs a faster engine or "
                      "model, shorter prompts or more GPUs"]
    found.sort(key=lambda c: (c.verdict != "would meet", c.value))
    more = len(found) - _SHOWN
    return [head, *(f"    {c.text(label)}" for c in found[:_SHOWN])] + (
        [f"    … and {more} more"] if more > 0 else []) + [
        "  then search again from a lower [workload.slo] min on those"]


def terminal_lines(source: FolderSource) -> list[str]:
    """Every what-if, for the terminal and the report (plain lines)."""
    return [line for r in reach(source) for line in r.lines]
