"""The measured rounds of a booted layout and the workload they send: the prompts (generated
once per run and workload), every repeat of one concurrency written to results.csv and raw/ as
it ends, the warm-up of a boot's first round, and where a round's time goes."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from pytest_ppsweep.cluster.nodeinfo import read_energy
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.folder.runfolder import RunJson
from pytest_ppsweep.matrix.model import Workload
from pytest_ppsweep.measure import bench
from pytest_ppsweep.measure.completion import counts
from pytest_ppsweep.measure.energy import EnergyPerToken, WindowEnergy, of_round
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.measure.phases import warmup_span
from pytest_ppsweep.results.objective import higher_is_better, is_decode, objective_of
from pytest_ppsweep.results.replace import missed_nn, replacement_for
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.context import RunContext
from pytest_ppsweep.run.live import RoundBar
from pytest_ppsweep.run.stops import raise_lost_stop
from pytest_ppsweep.service.launch import LayoutDead
from pytest_ppsweep.stats.decision import Rule, more_rounds_to_decide
from pytest_ppsweep.stats.spread import DEFAULT_MAX_REPEATS, more_rounds

__all__ = ["Rounds", "ThirdRepeat"]

# Why an emulated server's prefix hit rate is not measured (its requests report no cache)
NO_PREFIX_CACHE = "the emulator has no prefix cache"
# --ppsweep-adaptive: (config id, C, Input TPS of 2 repeats) -> why the 3rd is skipped
ThirdRepeat = Callable[[str, int, list[float]], str | None]


class Rounds:
    """Every repeat of a concurrency on a booted layout; each round is on disk before the next
    starts, a round a resume kept is not run again, and a rank's death aborts with its cause."""

    def __init__(self, ctx: RunContext, done: Iterable[tuple[str, int, int]] = ()) -> None:
        self.ctx = ctx
        self.done: frozenset[tuple[str, int, int]] = frozenset(done)
        self.third_repeat: ThirdRepeat | None = None
        self._warmed: set[str] = set()  # boot tokens of the layouts whose server was warmed

    def run_rounds(self, booted: Booted, concurrency: int) -> list[RoundResult]:
        """All repeats of one concurrency; every round is on disk before the next starts."""
        cfg = booted.config
        scale = booted.topology.time_scale
        results: list[RoundResult] = []
        workload = self.ctx.sweep.workload_of(cfg)
        repeats = workload.repeats
        decode = decode_workload(workload)
        spec, prompts = self.ctx.workloads.workload_for(cfg)
        cap = max(self.ctx.sweep.max_repeats or DEFAULT_MAX_REPEATS, repeats)
        # [sweep] boots: a later boot's rounds follow the point's rounds so far in this run;
        # the design is boots × rounds, so no adaptive extra round (a replacement still runs)
        several = self.ctx.sweep.boots > 1
        start = self._last_repeat(cfg.id, concurrency) if booted.boot_no > 1 else 0
        of_boot = f", boot {booted.boot_no}/{self.ctx.sweep.boots}" if several else ""
        planned = start + repeats
        repeat = start
        while True:
            repeat += 1
            # A round that missed N/N is kept with its errors and replaced once while the
            # layout is up (results/replace.py); a second failure at the point excludes it.
            failed = self._failed_rounds(cfg.id, concurrency)
            # (a later boot replaces only its own miss: an earlier boot's was replaced there)
            replacing = (replacement_for(failed, repeat, planned)
                         if min(failed, default=start + 1) > start else None)
            if replacing is not None:
                self.ctx.progress(f"{cfg.id} C={concurrency}: round {repeat} replaces "
                                  f"{replacing}{of_boot}")
            elif several and repeat > planned:
                break
            elif repeat > planned + min(len(failed), 1):
                # Adaptive repeats, decided while the layout is up: one more round while the
                # point's spread is over the limit (stats/spread.py), or, with [compare]
                # sequential, while a comparison it takes part in is undecided
                # (stats/decision.more_rounds_to_decide), up to max_repeats.
                why = self._more_rounds(cfg.id, concurrency, workload, repeats, cap,
                                        _boot_id(booted.service.boot_token))
                if why is None:
                    break
                self.ctx.progress(f"{cfg.id} C={concurrency}: extra round {repeat} (up to {cap}): "
                              f"{why}")
            if repeat == 3 and not several and (
                    why := self._skip_third(cfg.id, concurrency, results)):
                self.ctx.progress(f"{cfg.id} C={concurrency}: round 3/{repeats} skipped (adaptive "
                              f"repeats): {why}")
                break
            of = (f"{repeat}/{planned}{of_boot}" if repeat <= planned
                  else f"{repeat} (replacement{of_boot})" if several else f"{repeat} (extra)")
            if (cfg.id, concurrency, repeat) in self.done:
                self.ctx.progress(f"{cfg.id} C={concurrency}: round {of} kept (resume)")
                continue
            raise_lost_stop()  # a stop signal dropped inside a finalizer ends the run here
            booted.check_alive()
            self.ctx.snapshots.changed(booted.cluster)
            t0 = time.monotonic()
            self.ctx.live.begin(cfg.id)
            self.ctx.progress(f"{cfg.id} C={concurrency}: round {of} started")
            bar = RoundBar(self.ctx.live, cfg.id, f"benchmark c{concurrency} r{of}",
                           spec.num_requests, scale, decode=decode)
            with self.ctx.store.open_raw(cfg.id, concurrency, repeat) as raw:

                def write(record: dict[str, Any], raw: Any = raw, bar: RoundBar = bar) -> None:
                    raw.write(json.dumps(record) + "\n")
                    raw.flush()
                    bar.done(record)

                energy_before = read_energy(booted.cluster, self.ctx.registry)
                call_wall, call_t0 = time.time(), time.perf_counter()
                try:
                    result = bench.run_round_sync(
                        booted.service.target_url,
                        prompts,
                        concurrency,
                        spec=spec,
                        time_scale=scale,
                        on_record=write,
                        cancel=booted.service.died,
                        warmup=self.warm_up(booted),
                        engine=engine_of(booted.config.engine),
                        hits_unmeasured=(NO_PREFIX_CACHE if booted.topology.simulated
                                         else None),
                    )
                except bench.RoundCancelled:
                    self._round_phases(cfg.id, call_wall, call_t0, None)
                    self._aborted(booted, concurrency, repeat, t0)
                finally:
                    self.ctx.live.end(cfg.id)
                call_end = time.time()
                energy = of_round(energy_before, read_energy(booted.cluster, self.ctx.registry),
                                  booted.cluster.gpus, call_wall, call_end)
            self._round_phases(cfg.id, call_wall, call_t0, result)
            self.ctx.live.took(cfg.id, "round", time.monotonic() - t0)
            rows_t0 = time.perf_counter()
            self.ctx.store.append_result(
                {
                    "run_id": self.ctx.store.run_id,
                    "config_id": cfg.id,
                    **cfg.deployment.columns(),
                    "concurrency": concurrency,
                    "repeat": repeat,
                    **result.as_row(),
                    "time_scale": scale,
                    "simulated": booted.topology.simulated,
                    "reused": False,
                    "extra": repeat > planned,
                    "boot": _boot_id(booted.service.boot_token),
                    **round_energy(energy, result).as_row(),
                }
            )
            self.ctx.progress(
                f"{cfg.id} C={concurrency}: round {of} "
                f"{result.completed}/{result.num_requests} done, {round_metrics(result, decode)} "
                f"({time.monotonic() - t0:.1f} s real)"
            )
            if result.hit_rate_implied is not None:
                self.ctx.progress(f"{cfg.id} C={concurrency}: round {of} {hit_line(result)}")
            self.ctx.phases.add(cfg.id, "results", time.perf_counter() - rows_t0)
            results.append(result)
            if booted.look() is not None:  # the round ended by itself, but a rank died meanwhile
                self._aborted(booted, concurrency, repeat, t0)
        return results

    def _more_rounds(self, config_id: str, concurrency: int, workload: Workload,
                     repeats: int, cap: int, boot: str) -> str | None:
        """Why the point needs one more round, from the valid rounds in results.csv (a resumed
        run's kept rounds too), or None: its spread over the threshold, fewer than ``cap``
        rounds (only under the strict spread rule: with ``spread_rule = "warn"`` a spread over
        the limit is a warning, and no extra round is needed to make it hold); or, with
        ``[compare] sequential``, a comparison with a point of the same workload measured
        earlier is undecided and could still be decided by ``cap``."""
        objective = objective_of(json.loads(json.dumps(workload.as_json())))
        metric = objective[0]
        measured = self._valid_values(metric, concurrency)
        values = measured.pop(config_id, [])
        if self.ctx.sweep.spread_rule == "fail":
            # the spread rule looks within this boot (stats/spread.boot_spread_pct): a
            # resumed point's earlier boot differs by the boot-to-boot level, not by a faulty
            # round that one more round here could outvote
            own = self._valid_values(metric, concurrency, boot).get(config_id, [])
            why = more_rounds(own, repeats, self.ctx.sweep.spread_threshold * 100.0, cap,
                              keep=self.ctx.sweep.min_repeats)
            if why is not None:
                return why
        if not self.ctx.sweep.compare_sequential:
            return None
        same = {c.id for c in self.ctx.sweep.configs
                if self.ctx.sweep.workload_of(c) == workload and c.id != config_id}
        rivals = {cid: v for cid, v in measured.items() if cid in same}
        tried = {str(row.get("config_id")) for row in self.ctx.store.result_rows()
                 if str(row.get("concurrency")) == str(concurrency)}
        chosen = RunJson(self.ctx.store).selected()
        if chosen is not None:  # this run's points at this C (-k, --ppsweep-config)
            same = {cid for cid in same if concurrency in (chosen.get(cid) or ())}
        later = len(same - tried)  # still to measure at this C
        rule = Rule(alpha=self.ctx.sweep.compare_alpha,
                    min_effect_pct=self.ctx.sweep.compare_min_effect_pct,
                    first_look=repeats, last_look=cap)
        return more_rounds_to_decide(values, rivals, higher_is_better(metric), rule,
                                     family=max(1, len(rivals)) * len(workload.concurrency),
                                     tie_break=len(objective) > 1, later=later)

    def _last_repeat(self, config_id: str, concurrency: int) -> int:
        """The highest repeat of the point in results.csv so far (0: none): a later boot's
        first round is the next ([sweep] boots)."""
        return max((int(str(row.get("repeat"))) for row in self.ctx.store.result_rows()
                    if row.get("config_id") == config_id
                    and str(row.get("concurrency")) == str(concurrency)), default=0)

    def _valid_values(self, metric: str, concurrency: int,
                      boot: str | None = None) -> dict[str, list[float]]:
        """Every point's valid rounds of ``metric`` at ``concurrency`` so far (results.csv, a
        resumed run's kept rounds too), in round order; only those of one ``boot`` (results.csv
        ``boot``) when given."""
        out: dict[str, list[float]] = {}
        for row in self.ctx.store.result_rows():
            if str(row.get("concurrency")) != str(concurrency) or not counts(row):
                continue
            if boot is not None and str(row.get("boot") or "") != boot:
                continue
            try:
                value = float(row.get(metric) or "nan")
            except ValueError:
                continue
            if value == value:
                out.setdefault(str(row.get("config_id")), []).append(value)
        return out

    def _failed_rounds(self, config_id: str, concurrency: int) -> list[int]:
        """The repeats of this point that missed N/N so far (results.csv)."""
        return [int(str(row.get("repeat"))) for row in self.ctx.store.result_rows()
                if row.get("config_id") == config_id
                and str(row.get("concurrency")) == str(concurrency) and missed_nn(row)]

    def _skip_third(self, config_id: str, concurrency: int,
                    results: list[RoundResult]) -> str | None:
        """--ppsweep-adaptive: why the third repeat of this point is not needed, or None."""
        gate = self.third_repeat
        tps = [r.input_tps for r in results if r.input_tps is not None]
        if gate is None or len(results) != 2 or len(tps) != 2:
            return None
        why: str | None = gate(config_id, concurrency, tps)
        return why

    def warm_up(self, booted: Booted) -> bool:
        """Whether this round sends the warm-up requests: only the first round of a boot for
        each workload (the server stays warm for the later rounds; each still starts with
        /flush_cache), also when several workloads share the boot."""
        token = f"{booted.service.boot_token}/{booted.config.workload}"
        if token in self._warmed:
            return False
        self._warmed.add(token)
        return True

    def _round_phases(
        self, config_id: str, wall: float, t0: float, result: RoundResult | None
    ) -> None:
        """A round's call (from ``t0``, ``time.perf_counter()``) split into its measured
        requests, its warm-up and the rest."""
        took = time.perf_counter() - t0
        measured = warm = 0.0
        if result is not None:
            measured = min(took, result.duration_raw_s)
            warm = min(took - measured, warmup_span(result.warmup_records))
        self.ctx.phases.add(config_id, "round", measured)
        self.ctx.phases.add(config_id, "warm-up", warm)
        self.ctx.phases.add(config_id, "flush", took - measured - warm)
        self.ctx.phases.mark(config_id, wall, wall + took)

    def _aborted(self, booted: Booted, concurrency: int, repeat: int, t0: float) -> NoReturn:
        """A rank died during round ``repeat``: say so and fail with the cause."""
        cid = booted.config.id
        reason = booted.dead
        repeats = self.ctx.sweep.workload_of(booted.config).repeats
        self.ctx.progress(
            f"{cid} C={concurrency}: round {repeat}/{repeats} aborted after "
            f"{time.monotonic() - t0:.1f} s real: {reason}"
        )
        raise LayoutDead(
            f"{cid}: layout dead: {reason}; round c{concurrency} r{repeat}/{repeats} aborted\n"
            f"{booted.service.evidence()}"
        ) from None


def round_energy(window: WindowEnergy, result: RoundResult) -> EnergyPerToken:
    """The round's energy per input, output and total token and per completed request (the
    server's token counts where it gave them, else the nominal ones)."""
    inputs = result.input_tokens if result.input_tokens is not None \
        else result.input_tokens_nominal
    outputs = result.output_tokens if result.output_tokens is not None \
        else result.output_tokens_nominal or 0
    return window.per_token(inputs, outputs, result.completed)


def _boot_id(token: str) -> str:
    """The results.csv ``boot`` of a round: a digest of its boot's token ("" without one),
    prefixed so that no reader takes it for a number."""
    return "boot-" + hashlib.sha256(token.encode()).hexdigest()[:12] if token else ""


def _fmt(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:,.2f}"


def decode_workload(workload: Workload) -> bool:
    """Whether ``workload``'s progress shows decode metrics (its objective: results/objective.py,
    on the workload as run.json holds it)."""
    return is_decode(objective_of(json.loads(json.dumps(workload.as_json()))))


def round_metrics(result: RoundResult, decode: bool) -> str:
    """A round's metrics in its workload's own terms: a decode workload's output TPS, TPOT p50
    and ITL p50; a prefill workload's Input TPS and TTFT p50 (results/objective.is_decode)."""
    if decode:
        return (f"output TPS {_fmt(result.output_tps)}, TPOT p50 {_ms(result.tpot_p50_s)}, "
                f"ITL p50 {_ms(result.itl_p50_s)}")
    return f"Input TPS {_fmt(result.input_tps)}, TTFT p50 {_fmt(result.ttft_p50_s)} s"


def hit_line(result: RoundResult) -> str:
    """A shared-prefix round's prefix hit rate: achieved (and from what) against implied, or
    why it is not measured; a round beyond the tolerance says it is not counted."""
    implied = result.hit_rate_implied or 0.0
    if result.hit_rate_achieved is None:
        return f"prefix hit rate {result.hit_rate_source} (implied {implied:.1%})"
    tol = result.hit_rate_tolerance or 0.0
    off = abs(result.hit_rate_achieved - implied) > tol
    return (f"prefix hit rate {result.hit_rate_achieved:.1%} achieved ({result.hit_rate_source}), "
            f"{implied:.1%} implied, ±{tol:.1%}: "
            + ("OFF, the round is not counted" if off else "within"))


def _ms(seconds: float | None) -> str:
    """``84.9 ms`` (``n/a`` when not measured)."""
    if seconds is None or seconds != seconds:
        return "n/a"
    return f"{seconds * 1000:,.1f} ms"
