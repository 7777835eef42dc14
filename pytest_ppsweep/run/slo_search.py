"""The SLO search on a booted layout (test_slo): the highest load within the workload's SLO,
on one boot.

The probe policy is measure/slosearch.py and results/slocapacity.py (pure); the verdict of each
probe is measure/withinslo.py
(the N/N rule included). This module only runs the probes the policy asks for against the
booted service, through the same load generator as every round, and writes each one as it is
produced: ``slo_probes.csv`` (one row per probe, appended under the run folder's lock),
``raw/<layout>/slo-p<k>.jsonl`` (its requests, as they complete) and, at the end,
``slo/<layout>.json`` (the outcome). A crash keeps every finished probe, and a resumed run
(``--ppsweep-resume``) replays the layout's recorded probes into the policy before it measures
anything, so it goes on from the first probe that did not finish (a finished search measures
nothing again).

A rate probe sends ``[workload.slo] requests`` (default: the workload's ``num_requests``) with
bench_serving's ``--request-rate`` semantics (measure/arrivals.py) under ``max_concurrency``
(0: no cap); a concurrency probe sends them at that C with the workload's own ``request_rate``
(inf: all at once). Probe ``k`` (repeats and refines included) draws arrival stream ``k``: its
own schedule, the same on every layout. After the bracket, refine probes narrow the capacity
estimate (stats/capacity.py); each probe's counts over every percentile limit are kept in
``over_limit`` so a resumed search fits and asks exactly what it would have.
Before the first probe the search says how many requests a probe needs to prove each
percentile limit at the SLO's confidence (measure/withinslo.py; independent ones: a probe's
own dispersion lowers the count its requests are worth) and, with ``requests = "auto"``, the
probe size computed from the layout's measured prefill time (measure/probesize.py) and why.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import time
from dataclasses import replace
from typing import Any

from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.folder.runfolder import PROBE_COLUMNS as PROBE_COLUMNS
from pytest_ppsweep.folder.runfolder import SLO_PROBES_CSV, RunStore, slo_outcome_json
from pytest_ppsweep.matrix.model import Config, Workload
from pytest_ppsweep.matrix.slospec import SloSpec
from pytest_ppsweep.measure import bench
from pytest_ppsweep.measure.completion import counts
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.measure.probesize import probe_size, queue_floor
from pytest_ppsweep.measure.slosearch import Search, SearchOutcome, load_text
from pytest_ppsweep.measure.withinslo import SloVerdict, evaluate
from pytest_ppsweep.measure.workload import WorkloadSpec, generate_prompts
from pytest_ppsweep.results import cost
from pytest_ppsweep.results.sloanswer import number, read_probes
from pytest_ppsweep.results.slocapacity import CapacitySearch, over_cell, parse_over
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.context import RunContext
from pytest_ppsweep.run.live import RoundBar
from pytest_ppsweep.run.rounds import Rounds, decode_workload
from pytest_ppsweep.stats.binomial import min_requests
from pytest_ppsweep.stats.capacity import Capacity

__all__ = ["PROBES_CSV", "PROBE_COLUMNS", "SloSearch", "outcome_path", "parse_over"]

PROBES_CSV = SLO_PROBES_CSV


def outcome_path(config_id: str) -> str:
    """The outcome's path in the run folder."""
    return slo_outcome_json(config_id)


def tps_per_user(result: RoundResult, output_len: int) -> float | None:
    """Per-user speed: output tokens/s of one request (1 / TPOT p50), or for a prefill
    workload (one output token) prompts/s of one request (1 / TTFT p50)."""
    per = result.tpot_p50_s if output_len > 1 else result.ttft_p50_s
    return 1.0 / per if per and math.isfinite(per) and per > 0 else None


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def probe_row(run_id: str, price: float | None, booted: Booted, workload: Workload,
              slo: SloSpec, probe: int, phase: str, load: float, spec: WorkloadSpec,
              concurrency: int, result: RoundResult, verdict: SloVerdict) -> dict[str, Any]:
    """One slo_probes.csv row (builtins; None for unknown)."""
    cfg = booted.config
    gpus = cfg.gpus
    return {
        "run_id": run_id, "config_id": cfg.id, **cfg.deployment.columns(),
        "gpus": gpus, "workload": cfg.workload or "default",
        "search": slo.search, "probe": probe, "phase": phase, "load": load,
        "request_rate": spec.request_rate if math.isfinite(spec.request_rate) else "inf",
        "concurrency": concurrency, "within": verdict.within,
        "reasons": "; ".join(verdict.reasons), "num_requests": result.num_requests,
        "completed": result.completed, "failed": result.failed, "good": verdict.good,
        "goodput_rps": _num(verdict.goodput_rps), "attainment": verdict.attainment,
        "duration_s": result.duration_s, "input_tps": _num(result.input_tps),
        "output_tps": _num(result.output_tps),
        "input_tps_per_gpu": _num(result.input_tps / gpus),
        "output_tps_per_gpu": _num(result.output_tps / gpus),
        "tps_per_user": tps_per_user(result, workload.output_len),
        "ttft_p50_s": _num(result.ttft_p50_s), "ttft_p99_s": _num(result.ttft_p99_s),
        "tpot_p50_s": _num(result.tpot_p50_s), "tpot_p99_s": _num(result.tpot_p99_s),
        "itl_p99_s": _num(result.itl_p99_s), "e2e_p50_s": _num(result.e2e_p50_s),
        "e2e_p99_s": _num(result.e2e_p99_s),
        "lag_p99_raw_s": None if verdict.lag is None else verdict.lag.p99_s,
        "usd_per_m_input": cost.per_million(_num(result.input_tps), gpus, price),
        "usd_per_m_output": cost.per_million(_num(result.output_tps), gpus, price),
        "time_scale": booted.topology.time_scale, "simulated": booted.topology.simulated,
        "over_limit": over_cell(verdict.over),
    }


def _append(store: RunStore, row: dict[str, Any]) -> None:
    path = store.dir / PROBES_CSV
    with store.locked():
        if path.exists():  # a row torn by a kill is cut, so this one starts on its own line
            data = path.read_bytes()
            if data and not data.endswith(b"\n"):
                path.write_bytes(data[: data.rfind(b"\n") + 1])
        new = not path.exists() or path.stat().st_size == 0
        fields: list[str] = list(PROBE_COLUMNS)
        if not new:  # a file an earlier version began (a resumed run) keeps its own columns
            with path.open(newline="", encoding="utf-8") as fh:
                fields = next(csv.reader(fh), []) or fields
        with path.open("a", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow({k: "" if row.get(k) is None else row[k] for k in fields})
            fh.flush()
            os.fsync(fh.fileno())


def new_search(workload: Workload, ceiling: float | None = None) -> CapacitySearch:
    """The policy's state for ``workload`` (its SLO's range, precision, budget; its repeats;
    the capacity estimate's precision and refine budget; ``ceiling``: the layout's saturation
    rate, which its refine probes stay below)."""
    slo = workload.slo
    if slo is None:
        raise ValueError("the workload has no SLO")
    bracket = Search(slo.low, slo.high, slo.precision, slo.max_probes, repeats=workload.repeats,
                     integer=slo.search == "concurrency",
                     unit="req/s" if slo.search == "rate" else "C")
    return CapacitySearch(
        bracket, {lim.key: 1.0 - (lim.percentile or 100) / 100.0
                  for lim in slo.percentile_limits},
        slo.confidence, slo.precision_pct, slo.max_refine,
        ceiling if slo.search == "rate" else None)


def replay(search: CapacitySearch, recorded: list[dict[str, str]], config_id: str) -> int:
    """Feed the probes an interrupted run recorded for this layout (``slo_probes.csv`` rows, in
    probe order) into ``search``, as if measured now; the number replayed. The policy is
    deterministic, so each row must be the probe it asks next: one that is not (the search's
    settings changed since) is an error naming it, never silently mixed in."""
    for row in sorted(recorded, key=lambda r: int(r["probe"])):
        step = search.next()
        load = float(row["load"])
        if step is None or step[1] != row["phase"] or not math.isclose(step[0], load,
                                                                      rel_tol=1e-9):
            raise ValueError(
                f"{config_id}: {PROBES_CSV} probe {row['probe']} ({row['phase']} at {load}) is "
                f"not the probe this search asks ({step}): its [workload.slo] changed since; "
                "start a new run")
        search.record(step[0], row["within"] == "True", parse_over(row.get("over_limit")))
    return len(recorded)


def plan_text(slo: SloSpec, num_requests: int, repeats: int) -> str:
    """What the search will spend, said before it starts: its probes (search, repeats, the
    confirm round) of ``num_requests`` each and, for a rate search, how long a probe's arrivals
    last at both ends of the range (the cluster time it asks for)."""
    text = (f"SLO search plan: at most {slo.max_probes} search probes to bracket the load "
            f"within {load_text(slo.precision, slo.search == 'concurrency')} {slo.unit}, then "
            f"up to {max(repeats - 1, 0)} repeat(s) at the low end and 1 at the high end, "
            f"{num_requests} requests a probe")
    if slo.search == "rate":
        text += (f"; a probe's arrivals last {num_requests / slo.low:.0f} s at "
                 f"{load_text(slo.low, False)} req/s and {num_requests / slo.high:.0f} s at "
                 f"{load_text(slo.high, False)} req/s (emulated or real seconds)")
    if slo.max_refine and slo.percentile_limits:
        text += (f"; then up to {slo.max_refine} refine probe(s) of {num_requests} requests "
                 f"either side of the estimated capacity until its {slo.confidence:.0%} "
                 f"interval is within ±{slo.precision_pct:g} % (at most "
                 f"{slo.max_probes + repeats + slo.max_refine} probes, "
                 f"{(slo.max_probes + repeats + slo.max_refine) * num_requests} requests in all)")
    return text


def refine_text(search: CapacitySearch, num_requests: int) -> str:
    """Said when the refine probes start: where the capacity stands and how many probes the
    precision needs by the probes so far (the interval narrows as the square root of the
    requests near the crossing, their measured dispersion included)."""
    cap, pct = search.capacity(), search.precision_pct or 0.0
    if cap is None:
        return (f"SLO refine: the probes do not place the capacity yet; up to "
                f"{search.max_refine} refine probe(s) of {num_requests} requests near the "
                "crossing")
    need = max(1, math.ceil(cap.probes * ((cap.half_width_pct / pct) ** 2 - 1)))
    return (f"SLO refine: capacity {cap.text(search.bracket.unit)}; dispersion "
            f"{cap.dispersion:.1f} (a probe's requests count as 1/{cap.dispersion:.1f} "
            f"independent ones); ±{pct:g} % needs about {need} more probe(s) of {num_requests} "
            f"requests (at most {search.max_refine})")


class SloSearch:
    """The SLO search step of a run (what ``SweepRun.slo_search`` calls)."""

    def __init__(self, ctx: RunContext, rounds: Rounds) -> None:
        self.ctx, self.rounds = ctx, rounds

    def run(self, booted: Booted) -> SearchOutcome:
        """Search the highest load within the SLO of the layout's workload on ``booted``."""
        cfg: Config = booted.config
        workload = self.ctx.sweep.workload_of(cfg)
        slo = workload.slo
        if slo is None:
            raise ValueError(f"{cfg.id}: its workload has no SLO")
        base, prompts = self.ctx.workloads.workload_for(cfg)
        own = base.num_requests
        rows = self.ctx.store.result_rows()
        size, said, service = probe_requests(slo, rows, cfg.id, own)
        if said:
            self.ctx.progress(said)
        if not slo.auto_requests and size < queue_floor(slo):
            self.ctx.progress(f"WARNING: {cfg.id}: a probe sends {size} requests, fewer than the "
                              f"{queue_floor(slo)} that let an overload show (measure/overload.py"
                              "): above capacity its queue may not build before it ends; raise "
                              "[workload.slo] requests or set it to \"auto\"")
        saturation = saturation_rate(rows, cfg.id) if slo.search == "rate" else None
        if said := saturation_text(cfg.id, saturation, slo.search):
            self.ctx.progress(said)
        if size != base.num_requests:
            base = replace(base, num_requests=size)
            prompts = generate_prompts(base)  # the probes' own size ([workload.slo] requests)
        scale = booted.topology.time_scale
        search = new_search(workload, saturation)
        raw_dir = self.ctx.store.raw_dir(cfg.id)
        raw_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        recorded = [r for r in read_probes(self.ctx.store.dir)
                    if r["config_id"] == cfg.id and r["workload"] == (cfg.workload or "default")]
        for lim in slo.percentile_limits:
            need = min_requests(lim.percentile or 100, slo.confidence)
            short = base.num_requests < need
            self.ctx.progress(
                ("WARNING: " if short else "")
                + f"{cfg.id}: {lim} is judged with a {slo.confidence:.0%} binomial bound: a probe "
                f"needs at least {need} requests to prove it (independent ones: requests that "
                "come in runs count less, stats/binomial.dispersion); a probe sends "
                f"{base.num_requests}" + (": every probe will be unproven, raise "
                                          "[workload.slo] requests" if short else ""))
        self.ctx.progress(f"{cfg.id}: {plan_text(slo, base.num_requests, workload.repeats)}")
        if replay(search, recorded, cfg.id):
            self.ctx.progress(f"{cfg.id}: SLO search resumed: {len(recorded)} probe(s) kept from "
                          "the interrupted run")
        bracket = search.bracket
        refine_said = False
        # the first probe's TTFT p50 (the TTFT with no queue): kept by a resumed run, else
        # measured below; requests = "auto" sizes the later probes on it
        first_ttft = next((number(r.get("ttft_p50_s")) for r in recorded if r["probe"] == "1"),
                          None)
        while (step := search.next()) is not None:
            load, phase = step
            k = len(search.rounds) + 1
            if service is not None and k > 1:  # "auto": sized once the first probe measured
                size, said = resized(slo, service, first_ttft, cfg.id, own)
                self.ctx.progress(said)
                service = None
                if size != base.num_requests:
                    base = replace(base, num_requests=size)
                    prompts = generate_prompts(base)
                    # the budget again, in the probes' own size (the first one's was a floor)
                    self.ctx.progress(f"{cfg.id}: "
                                      f"{plan_text(slo, base.num_requests, workload.repeats)}")
            if phase == "refine" and not refine_said:
                refine_said = True
                self.ctx.progress(f"{cfg.id}: {refine_text(search, base.num_requests)}")
            if slo.search == "rate":
                spec = replace(base, request_rate=load, arrival_stream=k)
                conc = slo.max_concurrency or base.num_requests
            else:
                spec, conc = replace(base, arrival_stream=k), int(load)
            booted.check_alive()
            what = (f"SLO {phase} {k} (probe {bracket.spent + (phase == 'search')}/"
                    f"{slo.max_probes}) at {load_text(load, bracket.integer)} {bracket.unit}"
                    if phase != "refine" else
                    f"SLO refine {k} ({search.refines + 1}/{slo.max_refine}) at "
                    f"{load_text(load, bracket.integer)} {bracket.unit}")
            bar = RoundBar(self.ctx.live, cfg.id, what, spec.num_requests, scale,
                           decode=decode_workload(workload))
            with (raw_dir / f"slo-p{k}.jsonl").open("w", encoding="utf-8") as raw:

                def write(record: dict[str, Any], raw: Any = raw, bar: RoundBar = bar) -> None:
                    raw.write(json.dumps(record) + "\n")
                    raw.flush()
                    bar.done(record)

                try:
                    result = bench.run_round_sync(
                        booted.service.target_url, prompts, conc, spec=spec, time_scale=scale,
                        on_record=write, cancel=booted.service.died,
                        warmup=self.rounds.warm_up(booted),
                        engine=engine_of(booted.config.engine))
                except bench.RoundCancelled:
                    booted.check_alive()
                    raise
                finally:
                    self.ctx.live.end(cfg.id)
            verdict = evaluate(result, slo, load if slo.search == "rate" else None, saturation)
            if k == 1:
                first_ttft = _num(result.ttft_p50_s)
            _append(self.ctx.store, probe_row(self.ctx.store.run_id, self.ctx.sweep.gpu_hour_usd,
                                              booted, workload, slo, k, phase, load, spec, conc,
                                              result, verdict))
            search.record(load, verdict.within, dict(verdict.over),
                          unproven=bool(verdict.unproven) and not verdict.overloaded)
            self.ctx.progress(f"{cfg.id}: {what}: {'within' if verdict.within else 'outside'} the "
                          f"SLO ({slo.text()})" + ("" if verdict.within else
                                                    f": {'; '.join(verdict.reasons)}"))
        outcome, capacity = bracket.outcome(), search.capacity()
        spans = search.interval(saturation) if capacity is None else None
        text = outcome_text(outcome, capacity, search.refines, search.crossing() is not None,
                            spans)
        found = outcome_json(cfg, workload, outcome, capacity, search.refines, text)
        found["saturation_rps"] = saturation
        found["bracket_interval"] = None if spans is None else list(spans)
        self.ctx.store.write_json(outcome_path(cfg.id), found)
        self.ctx.progress(f"{cfg.id}: highest load within {slo.text()}: {text} "
                          f"({time.monotonic() - started:.1f} s real)")
        self.ctx.cluster_time.worked(cfg.id, time.monotonic() - started)
        return outcome


def service_time(rows: list[dict[str, str]], config_id: str) -> float | None:
    """A layout's measured prefill time per request (seconds of the run's clock: emulated on
    the emulator): input tokens per completed request over the Input TPS of its valid rounds
    at its highest C (the queue saturated), their median; None without such a round."""
    mine = [r for r in rows if r.get("config_id") == config_id and counts(r)]
    if not mine:
        return None
    top = max(int(str(r.get("concurrency"))) for r in mine)
    each = []
    for r in mine:
        try:
            tokens, done, tps = (float(r.get("input_tokens") or "nan"),
                                 float(r.get("completed") or "nan"),
                                 float(r.get("input_tps") or "nan"))
        except ValueError:
            continue
        if int(str(r.get("concurrency"))) == top and done > 0 and tps > 0 and tokens > 0:
            each.append(tokens / done / tps)
    return statistics.median(each) if each else None


def saturation_rate(rows: list[dict[str, str]], config_id: str) -> float | None:
    """A layout's saturation rate (requests per second of the run's clock): the most it served
    in its closed-loop rounds of this run, each round's completed requests over its duration
    (its Input TPS over its input tokens per request: the closed-loop throughput over the input
    length), the median over the valid repeats at each C, the highest of those medians; None
    without such a round (an SLO-only run: ``-k slo``). No open loop carries more
    (measure/overload.py)."""
    per_c: dict[int, list[float]] = {}
    for r in rows:
        if r.get("config_id") != config_id or not counts(r):
            continue
        try:
            tokens, done, tps = (float(r.get("input_tokens") or "nan"),
                                 float(r.get("completed") or "nan"),
                                 float(r.get("input_tps") or "nan"))
            c = int(str(r.get("concurrency")))
        except ValueError:
            continue
        if done > 0 and tps > 0 and tokens > 0:
            per_c.setdefault(c, []).append(done * tps / tokens)
    return max((statistics.median(v) for v in per_c.values()), default=None)


def saturation_text(config_id: str, rate: float | None, search: str) -> str:
    """The progress line that states the saturation rate the probes are held to, or that none
    was measured."""
    if search != "rate":
        return ""
    if rate is None:
        return (f"WARNING: {config_id}: no closed-loop round of this layout in this run, so no "
                "saturation rate: a probe's load is not checked against it (the delivered-rate "
                "and wait-trend tests still mark an overloaded probe; measure/overload.py)")
    return (f"{config_id}: saturation rate {rate:.3g} req/s (its closed-loop throughput in this "
            "run over the input length): a probe at or above it is overloaded, never within "
            "(measure/overload.py)")


def probe_requests(slo: SloSpec, rows: list[dict[str, str]], config_id: str,
                   num_requests: int) -> tuple[int, str, float | None]:
    """The requests the search's first probe sends, the line that says how they were chosen
    ("" for a size the sweep file states), and, when ``requests = "auto"`` can size the later
    probes once the first has measured the TTFT with no queue (:func:`resized`), the layout's
    measured prefill time per request at saturation in this run's ``rows`` (else None; a
    WARNING says why the workload's size is kept)."""
    if not slo.auto_requests:
        return slo.probe_requests(num_requests), "", None
    service = service_time(rows, config_id)
    size = probe_size(slo, service, num_requests)
    if not size.modelled or service is None:
        return size.requests, f"WARNING: {config_id}: {size.line()}", None
    # the binomial floor, the workload's size: it probes the minimum load (measure/probesize.py)
    first = probe_size(slo, None, num_requests, first=True).requests
    return first, (f"{config_id}: SLO probe size: the first probe (at the minimum load) sends "
                   f"{first} requests; the others are sized from what it measures "
                   f"(requests = \"auto\", measure/probesize.py)"), service


def resized(slo: SloSpec, service_s: float, first_ttft_p50_s: float | None, config_id: str,
            num_requests: int) -> tuple[int, str]:
    """``requests = "auto"``: the later probes' size from the layout's prefill time at
    saturation and the first probe's TTFT p50 (at the minimum load: the TTFT with no queue),
    and the line that says why (a WARNING when the model cannot size them)."""
    if first_ttft_p50_s is None or not first_ttft_p50_s > 0:
        size = probe_size(slo, None, num_requests)
        return size.requests, (f"WARNING: {config_id}: {size.line()}: the first probe measured "
                               "no TTFT to size the others on")
    size = probe_size(slo, service_s, num_requests, first_ttft_p50_s)
    return size.requests, ("" if size.modelled else "WARNING: ") + f"{config_id}: {size.line()}"


def outcome_text(outcome: SearchOutcome, capacity: Capacity | None, refines: int,
                 crossed: bool = True,
                 spans: tuple[float, float | None] | None = None) -> str:
    """The bracket's words, then the capacity estimate with its interval (or why none, and
    then where the bracket places it, ``spans``: CapacitySearch.interval; ``crossed``: some
    probe's share over a percentile limit crossed its allowance)."""
    if capacity is not None:
        est = f"capacity {capacity.text(outcome.unit)}"
    elif outcome.low is None:
        est = "no capacity estimate (nothing within the SLO from the minimum)"
    elif outcome.high is None:
        est = "no capacity estimate (within the SLO up to the maximum)"
    elif not crossed:
        est = ("no capacity estimate (no probe had more requests over a percentile limit than "
               "it allows: the probes outside it broke another rule)")
    else:
        est = "no capacity estimate (too few probes near the crossing to fit it)"
    if capacity is None and spans is not None:
        low, high = spans
        est += (f"; by the bracket the capacity is ≥ {load_text(low, outcome.integer)} "
                f"{outcome.unit}" + ("" if high is None else
                                     f" and < {load_text(high, outcome.integer)} {outcome.unit}")
                + " (no stated confidence)")
    return f"{outcome.text()}; {est}" + (f", {refines} refine probe(s)" if refines else "")


def outcome_json(cfg: Config, workload: Workload, outcome: SearchOutcome,
                 capacity: Capacity | None = None, refines: int = 0,
                 text: str | None = None) -> dict[str, Any]:
    """``slo/<layout>.json``: the search's outcome with what it was asked, and the capacity
    estimate (``capacity``: point, low, high, confidence; None when the probes cannot place
    it)."""
    slo = workload.slo
    assert slo is not None
    return {
        "capacity": None if capacity is None else {
            "point": capacity.point, "low": capacity.low, "high": capacity.high,
            "confidence": capacity.confidence, "probes": capacity.probes,
            "dispersion": capacity.dispersion, "half_width_pct": capacity.half_width_pct},
        "precision_pct": slo.precision_pct, "refines": refines, "max_refine": slo.max_refine,
        "config_id": cfg.id, **cfg.deployment.columns(), "gpus": cfg.gpus,
        "workload": cfg.workload or "default", "slo": slo.text(), "search": slo.search,
        "unit": outcome.unit, "low": outcome.low, "high": outcome.high,
        "min": outcome.min_load, "max": outcome.max_load, "precision": outcome.precision,
        "probes": outcome.probes, "max_probes": outcome.max_probes, "repeats": outcome.repeats,
        "repeats_wanted": outcome.repeats_wanted, "confirmed": outcome.confirmed,
        "high_outside": outcome.high_outside, "high_rounds": outcome.high_rounds,
        "high_confirmed": outcome.high_confirmed,
        "status": outcome.status,
        "text": text if text is not None else outcome_text(outcome, capacity, refines),
    }
