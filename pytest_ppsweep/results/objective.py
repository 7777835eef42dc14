"""What a workload's points are ranked by, and whose spread the validity rule reads.

- prefill-like workloads (output_len ≤ input_len / 16, the seeds' 16K → 1): Input TPS, then
  TTFT p50;
- decode-like workloads (longer outputs): output TPS, then TPOT p50;
- ``objective = [...]`` in the workload's table of the sweep file overrides both.

The first metric is the **primary** one: the spread rule reads its repeats.
"""

from __future__ import annotations

from typing import Any

from pytest_ppsweep.folder.runfolder import PointKey, RunJsonDict, RunKey
from pytest_ppsweep.matrix.schema import OBJECTIVE_METRICS

PREFILL = ("input_tps", "ttft_p50_s")
DECODE = ("output_tps", "tpot_p50_s")
LABELS = {"input_tps": "Input TPS", "output_tps": "output TPS", "ttft_p50_s": "TTFT p50",
          "ttft_p95_s": "TTFT p95", "tpot_p50_s": "TPOT p50", "itl_p50_s": "ITL p50",
          "e2e_p50_s": "E2E p50", "energy_j_per_total_token": "J/token (GPU board energy)"}


DECODE_FIRST = ("output_tps", "tpot_p50_s", "tpot_mean_s", "tpot_p99_s", "itl_p50_s",
                "itl_mean_s", "itl_p99_s")


def is_decode(objective: tuple[str, ...] | list[str]) -> bool:
    """Whether a workload ranked by ``objective`` is shown by its decode metrics (output TPS,
    TPOT, ITL) rather than prefill's (Input TPS, TTFT): its first metric is a decode one."""
    return bool(objective) and objective[0] in DECODE_FIRST


def higher_is_better(metric: str) -> bool:
    """Whether more of ``metric`` is better (throughputs) or worse (latencies)."""
    return OBJECTIVE_METRICS.get(metric, not metric.endswith("_s"))


def label(metric: str) -> str:
    """``Input TPS`` for ``input_tps``."""
    return LABELS.get(metric, metric)


def objective_of(workload: dict[str, Any] | None) -> tuple[str, ...]:
    """The ranking metrics of a workload as run.json holds it (its fields as a dict)."""
    if not isinstance(workload, dict):
        return PREFILL
    given = workload.get("objective")
    if isinstance(given, list | tuple) and given:
        return tuple(str(m) for m in given)
    try:
        inp, out = int(workload.get("input_len") or 0), int(workload.get("output_len") or 1)
    except (TypeError, ValueError):
        return PREFILL
    return DECODE if out > 1 and out * 16 > inp else PREFILL


def workload_objectives(raw: RunJsonDict) -> dict[str, tuple[str, ...]]:
    """Per workload name (``""`` for a sweep's one workload) its ranking metrics."""
    named = raw.get(RunKey.WORKLOADS)
    out = {"": objective_of(raw.get(RunKey.WORKLOAD))}
    if isinstance(named, dict):
        out.update({str(k): objective_of(v) for k, v in named.items()})
    return out


def holds_for(workload: dict[str, Any] | None) -> str | None:
    """What a trace or shared-prefix workload is, as an answer names it (its file by path and
    sha256, its scale; its stated prefix share and length); None for random-ids prompts, whose
    answers say no more than they always did."""
    if not isinstance(workload, dict):
        return None
    kind = workload.get("type")
    n = workload.get("num_requests")
    if kind == "trace":
        rate = workload.get("request_rate")
        pace = (f"at {rate} requests/s" if isinstance(rate, int | float) and rate != float("inf")
                else f"on its own timestamps × {workload.get('time_scale', 1.0)}")
        return (f"trace {workload.get('trace')} (sha256 {str(workload.get('trace_sha256'))[:12]}, "
                f"{n} requests, replayed {pace})")
    if kind == "shared_prefix":
        share = workload.get("prefix_share")
        shown = f"{share:.0%}" if isinstance(share, int | float) else str(share)
        return (f"shared prefix: {shown} of {n} requests start with one "
                f"{workload.get('prefix_len')}-token prefix of {workload.get('input_len')}")
    return None


def workload_texts(raw: RunJsonDict) -> dict[str, str]:
    """Per workload name (``""`` for a sweep's one workload) what :func:`holds_for` says of it,
    for the trace and shared-prefix workloads only."""
    named = raw.get(RunKey.WORKLOADS)
    found = {"": holds_for(raw.get(RunKey.WORKLOAD))}
    if isinstance(named, dict):
        found.update({str(k): holds_for(v) for k, v in named.items()})
    return {k: v for k, v in found.items() if v}


def point_workloads(raw: RunJsonDict) -> dict[str, str]:
    """Per point id its workload name, from run.json ``points`` ({} without points)."""
    points = raw.get(RunKey.POINTS)
    if not isinstance(points, dict):
        return {}
    return {str(k): str(v.get(PointKey.WORKLOAD) or "") for k, v in points.items()
            if isinstance(v, dict)}


def primary_metrics(raw: RunJsonDict) -> dict[str, str]:
    """Per point id the primary metric of its workload (points of no known workload: absent;
    the caller uses Input TPS)."""
    objectives = workload_objectives(raw)
    return {cid: objectives.get(w, PREFILL)[0] for cid, w in point_workloads(raw).items()}
