"""The profile window of a booted layout (seeds §9.3): one extra round wrapped by SGLang's
/start_profile and /stop_profile, kept out of the medians; every rank's trace collected, parsed
and attributed."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.cluster.backends import host_for
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.folder.runfolder import profile_request_json
from pytest_ppsweep.matrix.model import ProfileSpec
from pytest_ppsweep.measure import bench
from pytest_ppsweep.measure.workload import generate_prompts
from pytest_ppsweep.profile import attribution, collect, trace, tracefiles, window
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.context import RunContext

__all__ = ["WINDOW_END_S", "ProfileStep"]

# How long a profile window that ended by itself (num_steps) may take to write its traces
# before /stop_profile is sent (real SGLang on CPU: a few seconds).
WINDOW_END_S = 15.0


class ProfileStep:
    """The profile window of the layouts of one run."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def profile_round(self, booted: Booted) -> attribution.LayoutProfile:
        """One extra round wrapped by SGLang's /start_profile and /stop_profile, kept out of the
        medians (not in results.csv; its requests go to ``profile/<layout>/requests.jsonl``).
        Every rank's trace is collected from its node into ``profile/<layout>/``, parsed and
        attributed (``attribution.json``, ``profile.csv``). Raises ``collect.ProfileError``
        naming the node of a missing trace, ``trace.TraceError`` naming a file that cannot be
        parsed, ``LayoutDead`` when a rank dies meanwhile."""
        spec = self.ctx.sweep.profile or ProfileSpec()
        cfg, cluster = booted.config, booted.cluster
        engine = engine_of(cfg.engine)
        started = time.monotonic()
        booted.check_alive()
        conc = spec.concurrency or max(self.ctx.sweep.workload.concurrency)
        local = tracefiles.layout_dir(self.ctx.store.dir, cfg.id)
        local.mkdir(parents=True, exist_ok=True)
        folder = collect.remote_dir(cluster, spec.output_dir, self.ctx.store.run_id, cfg.id, local)
        profile_id = f"{time.time():.6f}"  # SGLang's own default is str(time.time())
        body = window.request_body(spec, folder, cfg.id, profile_id, engine)
        self.ctx.store.write_json(profile_request_json(cfg.id), body)
        round_spec = replace(self.ctx.workloads.spec, warmup_requests=0,
                             num_requests=spec.num_requests or self.ctx.workloads.spec.num_requests)
        prompts = generate_prompts(round_spec)
        url, scale = booted.service.target_url, booted.topology.time_scale
        self.ctx.progress(f"{cfg.id}: profile window: {spec.num_steps} steps per rank, "
                      f"C={conc}, {round_spec.num_requests} requests, traces to {folder}")
        window.start(url, body, cfg.id, engine)
        try:
            with (local / "requests.jsonl").open("w", encoding="utf-8") as raw:

                def write(record: dict[str, Any]) -> None:
                    raw.write(json.dumps(record) + "\n")

                result = bench.run_round_sync(
                    url, prompts, conc, spec=round_spec, time_scale=scale, on_record=write,
                    cancel=booted.service.died, engine=engine,
                )
        except BaseException as exc:
            # close the window if the server still answers; a rank's death is the cause to show
            with contextlib.suppress(collect.ProfileError):
                window.stop(url, cfg.id, engine)
            if isinstance(exc, bench.RoundCancelled):
                booted.check_alive()
            raise
        def traces(timeout_s: float) -> list[Path]:
            return collect.collect_traces(
                cluster, cfg, folder, local, f"{cfg.id}-{profile_id}",
                host_for=lambda n: host_for(cluster, cluster.hosts[n], self.ctx.registry),
                timeout_s=timeout_s,
            )

        # The window ends by itself after num_steps forward steps, which a round has: its
        # traces come without /stop_profile. Stopping an ended window makes SGLang log a
        # RuntimeError traceback ("Profiling is not in progress"), which the log scan must
        # call fatal, so the stop is only the fallback of a window still open.
        stopped = False
        try:
            files = traces(min(spec.timeout_s, WINDOW_END_S))
        except collect.ProfileError:
            stopped = window.stop(url, cfg.id, engine)
            files = traces(spec.timeout_s)
        lp = attribution.aggregate(cfg.id, [trace.parse(f) for f in files])
        tracefiles.write_layout(self.ctx.store.dir, lp)
        tracefiles.write_table(self.ctx.store.dir, self.ctx.sweep.baseline,
                            [c.id for c in self.ctx.sweep.configs])
        ar = lp.calls.get("all_reduce", 0)
        self.ctx.progress(
            f"{cfg.id}: profile window {'stopped' if stopped else 'ended after num_steps'}, "
            f"{result.completed}/{result.num_requests} requests, {len(files)} traces: "
            f"all-reduce {ar:g} calls {lp.cumulative_ms.get('all_reduce', 0.0):,.1f} ms, "
            f"exposed comm {lp.exposed_share:.1%}, overlap {lp.overlap_ratio:.1%}"
        )
        self.ctx.cluster_time.worked(cfg.id, time.monotonic() - started)
        return lp
