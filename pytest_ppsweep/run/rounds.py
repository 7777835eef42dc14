"""The measured rounds of a booted layout and the workload they send: the prompts (generated
once per run and workload), every repeat of one concurrency written to results.csv and raw/ as
it ends, the warm-up of a boot's first round, and where a round's time goes."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from pytest_ppsweep.matrix.model import Config, Sweep, Workload
from pytest_ppsweep.measure import bench
from pytest_ppsweep.measure.completion import counts
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.measure.phases import PhaseClock, warmup_span
from pytest_ppsweep.measure.runstore import RunStore
from pytest_ppsweep.measure.snapshots import GpuSnapshots
from pytest_ppsweep.measure.workload import PromptSet, WorkloadSpec, generate_prompts
from pytest_ppsweep.results.objective import objective_of
from pytest_ppsweep.results.spread import DEFAULT_MAX_REPEATS, more_rounds
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.live import LiveStatus, RoundBar
from pytest_ppsweep.service.launch import LayoutDead

__all__ = ["Rounds", "Workloads", "workload_spec"]

# --ppsweep-adaptive: (config id, C, Input TPS of 2 repeats) -> why the 3rd is skipped
ThirdRepeat = Callable[[str, int, list[float]], str | None]


def workload_spec(w: Workload) -> WorkloadSpec:
    """What the load generator needs of a sweep's workload."""
    return WorkloadSpec(
        input_len=w.input_len,
        output_len=w.output_len,
        range_ratio=w.range_ratio,
        num_requests=w.num_requests,
        seed=w.seed,
        vocab_size=w.vocab_size,
        warmup_requests=w.warmup_requests,
        api=w.api,
        request_timeout_s=w.request_timeout_s,
        round_timeout_s=w.round_timeout_s,
        request_rate=w.request_rate,
        burstiness=w.burstiness,
    )


class Workloads:
    """The workloads of one run: each one's spec and prompt set, generated once per run and
    identical for every configuration and repeat."""

    def __init__(self, sweep: Sweep) -> None:
        self.sweep = sweep
        self.spec = workload_spec(sweep.workload)
        self._prompts: PromptSet | None = None
        self._named_prompts: dict[str, tuple[WorkloadSpec, PromptSet]] = {}
        self._prompts_lock = threading.RLock()  # a booting layout's thread makes them too

    @property
    def prompts(self) -> PromptSet:
        # Generated once per run: identical for every configuration and repeat.
        with self._prompts_lock:
            if self._prompts is None:
                self._prompts = generate_prompts(self.spec)
            return self._prompts

    def workload_for(self, config: Config) -> tuple[WorkloadSpec, PromptSet]:
        """The spec and prompt set of the workload ``config`` measures (its named workload
        when the sweep has several, each generated once per run)."""
        if not config.workload or config.workload not in self.sweep.workloads:
            return self.spec, self.prompts
        with self._prompts_lock:
            if config.workload not in self._named_prompts:
                spec = workload_spec(self.sweep.workloads[config.workload])
                self._named_prompts[config.workload] = (spec, generate_prompts(spec))
            return self._named_prompts[config.workload]

    def prepare(self, config: Config) -> None:
        """The prompts of ``config``'s workload and their request bodies, made in a thread during
        the boot wait (the cluster works then, the plugin waits) instead of before the first
        round (~35 ms for the seeds' 41 prompts of 16K tokens); once. The completions API's
        bodies need the model name its server gives: they stay the round's."""
        with self._prompts_lock:
            named = config.workload and config.workload in self.sweep.workloads
            if (config.workload in self._named_prompts) if named else self._prompts is not None:
                return

        def prepare() -> None:
            with contextlib.suppress(Exception):  # the round makes them again, and says why not
                spec, prompts = self.workload_for(config)
                if spec.api == "generate":
                    prompts.bodies(spec, None)
                    prompts.bodies(spec, None, warmup=True)

        threading.Thread(target=prepare, name=f"ppsweep-prompts-{config.id}", daemon=True).start()


class Rounds:
    """Every repeat of a concurrency on a booted layout; each round is on disk before the next
    starts, a round a resume kept is not run again, and a rank's death aborts with its cause."""

    def __init__(
        self,
        sweep: Sweep,
        store: RunStore,
        workloads: Workloads,
        snapshots: GpuSnapshots,
        phases: PhaseClock,
        progress: Callable[[str], None],
        live: LiveStatus,
        done: Iterable[tuple[str, int, int]] = (),
    ) -> None:
        self.sweep = sweep
        self.store = store
        self.workloads = workloads
        self.snapshots = snapshots
        self.phases = phases
        self.progress = progress
        self.live = live
        self.done: frozenset[tuple[str, int, int]] = frozenset(done)
        self.third_repeat: ThirdRepeat | None = None
        self._warmed: set[str] = set()  # boot tokens of the layouts whose server was warmed

    def run_rounds(self, booted: Booted, concurrency: int) -> list[RoundResult]:
        """All repeats of one concurrency; every round is on disk before the next starts."""
        cfg = booted.config
        scale = booted.topology.time_scale
        results: list[RoundResult] = []
        workload = self.sweep.workload_of(cfg)
        repeats = workload.repeats
        spec, prompts = self.workloads.workload_for(cfg)
        cap = max(self.sweep.max_repeats or DEFAULT_MAX_REPEATS, repeats)
        repeat = 0
        while True:
            repeat += 1
            if repeat > repeats:
                # Adaptive repeats, decided while the layout is up: one more round while the
                # point's spread is over the limit (results/spread.py), up to max_repeats.
                why = self._more_rounds(cfg.id, concurrency, workload, repeats, cap)
                if why is None:
                    break
                self.progress(f"{cfg.id} C={concurrency}: extra round {repeat} (up to {cap}): "
                              f"{why}")
            if repeat == 3 and (why := self._skip_third(cfg.id, concurrency, results)):
                self.progress(f"{cfg.id} C={concurrency}: round 3/{repeats} skipped (adaptive "
                              f"repeats): {why}")
                break
            of = f"{repeat}/{repeats}" if repeat <= repeats else f"{repeat} (extra)"
            if (cfg.id, concurrency, repeat) in self.done:
                self.progress(f"{cfg.id} C={concurrency}: round {of} kept (resume)")
                continue
            booted.check_alive()
            self.snapshots.changed(booted.cluster)
            t0 = time.monotonic()
            self.live.begin(cfg.id)
            self.progress(f"{cfg.id} C={concurrency}: round {of} started")
            bar = RoundBar(self.live, cfg.id, f"benchmark c{concurrency} r{of}",
                           spec.num_requests, scale)
            with self.store.open_raw(cfg.id, concurrency, repeat) as raw:

                def write(record: dict[str, Any], raw: Any = raw, bar: RoundBar = bar) -> None:
                    raw.write(json.dumps(record) + "\n")
                    raw.flush()
                    bar.done(record)

                call_wall, call_t0 = time.time(), time.perf_counter()
                try:
                    result = bench.run_round_sync(
                        booted.service.base_url,
                        prompts,
                        concurrency,
                        spec=spec,
                        time_scale=scale,
                        on_record=write,
                        cancel=booted.service.died,
                        warmup=self.warm_up(booted),
                    )
                except bench.RoundCancelled:
                    self._round_phases(cfg.id, call_wall, call_t0, None)
                    self._aborted(booted, concurrency, repeat, t0)
                finally:
                    self.live.end(cfg.id)
            self._round_phases(cfg.id, call_wall, call_t0, result)
            self.live.took(cfg.id, "round", time.monotonic() - t0)
            rows_t0 = time.perf_counter()
            self.store.append_result(
                {
                    "run_id": self.store.run_id,
                    "config_id": cfg.id,
                    "pp": cfg.pp,
                    "tp": cfg.tp,
                    "ep": cfg.ep,
                    "concurrency": concurrency,
                    "repeat": repeat,
                    **result.as_row(),
                    "time_scale": scale,
                    "simulated": booted.topology.simulated,
                    "reused": False,
                    "extra": repeat > repeats,
                }
            )
            self.progress(
                f"{cfg.id} C={concurrency}: round {of} "
                f"{result.completed}/{result.num_requests} done, "
                f"Input TPS {_fmt(result.input_tps)}, TTFT p50 {_fmt(result.ttft_p50_s)} s "
                f"({time.monotonic() - t0:.1f} s real)"
            )
            self.phases.add(cfg.id, "results", time.perf_counter() - rows_t0)
            results.append(result)
            if booted.look() is not None:  # the round ended by itself, but a rank died meanwhile
                self._aborted(booted, concurrency, repeat, t0)
        return results

    def _more_rounds(self, config_id: str, concurrency: int, workload: Workload,
                     repeats: int, cap: int) -> str | None:
        """Why the point needs one more round (its spread over the threshold, fewer than
        ``cap`` rounds), from its valid rounds in results.csv (a resumed run's kept rounds
        too), or None. Only under the strict spread rule: with ``spread_rule = "warn"`` a spread
        over the limit is a warning, and no extra round is needed to make it hold."""
        if self.sweep.spread_rule != "fail":
            return None
        metric = objective_of(json.loads(json.dumps(workload.as_json())))[0]
        values = []
        for row in self.store.result_rows():
            if row.get("config_id") != config_id or str(row.get("concurrency")) != str(
                    concurrency) or not counts(row):
                continue
            try:
                values.append(float(row.get(metric) or "nan"))
            except ValueError:
                continue
        return more_rounds(values, repeats, self.sweep.spread_threshold * 100.0, cap,
                           keep=self.sweep.min_repeats)

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
        self.phases.add(config_id, "round", measured)
        self.phases.add(config_id, "warm-up", warm)
        self.phases.add(config_id, "flush", took - measured - warm)
        self.phases.mark(config_id, wall, wall + took)

    def _aborted(self, booted: Booted, concurrency: int, repeat: int, t0: float) -> NoReturn:
        """A rank died during round ``repeat``: say so and fail with the cause."""
        cid = booted.config.id
        reason = booted.dead
        repeats = self.sweep.workload_of(booted.config).repeats
        self.progress(
            f"{cid} C={concurrency}: round {repeat}/{repeats} aborted after "
            f"{time.monotonic() - t0:.1f} s real: {reason}"
        )
        raise LayoutDead(
            f"{cid}: layout dead: {reason}; round c{concurrency} r{repeat}/{repeats} aborted\n"
            f"{booted.service.evidence()}"
        ) from None


def _fmt(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:,.2f}"
