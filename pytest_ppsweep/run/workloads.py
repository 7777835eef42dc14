"""The workloads of one run: each workload's spec as the load generator takes it and its prompt
set, generated once per run (during the first boot wait) and identical for every configuration
and repeat: random-ids prompts, a Mooncake trace's (its file as the sweep file named it), or a
shared-prefix workload's (measure/tracereplay.py)."""

from __future__ import annotations

import contextlib
import math
import threading
from pathlib import Path

from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.matrix.model import Config, Sweep, Workload
from pytest_ppsweep.measure.tracereplay import read_trace, shared_prefix_trace
from pytest_ppsweep.measure.workload import (
    PromptSet,
    WorkloadSpec,
    generate_prompts,
    trace_prompts,
)

__all__ = ["Workloads", "make_prompts", "workload_spec"]


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


def make_prompts(w: Workload, spec: WorkloadSpec) -> PromptSet:
    """The prompt set of workload ``w`` (its type's): a trace replayed on its own timestamps
    stretched by ``time_scale`` (or at ``request_rate`` when the workload gives one); a
    shared-prefix workload's ``prefix_share`` of requests sharing a ``prefix_len``-token prefix,
    at the workload's rate; random-ids prompts otherwise."""
    if w.type == "trace":
        return trace_prompts(spec, read_trace(Path(w.trace_file)), slowdown=w.time_scale,
                             replay=math.isinf(w.request_rate), hit_tolerance=w.hit_tolerance)
    if w.type == "shared_prefix":
        trace = shared_prefix_trace(w.num_requests, w.input_len, w.output_len,
                                    prefix_len=w.prefix_len, share=w.prefix_share,
                                    block_size=w.prefix_len)
        return trace_prompts(spec, trace, replay=False, hit_tolerance=w.hit_tolerance)
    return generate_prompts(spec)


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
                self._prompts = make_prompts(self.sweep.workload, self.spec)
            return self._prompts

    def workload_for(self, config: Config) -> tuple[WorkloadSpec, PromptSet]:
        """The spec and prompt set of the workload ``config`` measures (its named workload
        when the sweep has several, each generated once per run)."""
        if not config.workload or config.workload not in self.sweep.workloads:
            return self.spec, self.prompts
        with self._prompts_lock:
            if config.workload not in self._named_prompts:
                w = self.sweep.workloads[config.workload]
                spec = workload_spec(w)
                self._named_prompts[config.workload] = (spec, make_prompts(w, spec))
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
                    engine = engine_of(config.engine)
                    prompts.bodies(spec, None, engine=engine)
                    prompts.bodies(spec, None, warmup=True, engine=engine)

        threading.Thread(target=prepare, name=f"ppsweep-prompts-{config.id}", daemon=True).start()
