"""The adaptive sweep inside a run (``--ppsweep-adaptive``): which layout the session boots
next, which it skips, and which third repeat it leaves out; pytest-free (the session applies it
to the items).

After each layout the planner's model is refitted to this run folder's valid rounds
(:func:`pytest_ppsweep.planner.fitting.fit`), and :func:`pytest_ppsweep.planner.nextlayout.decide`
picks the next layout or decides the best. Every decision is a progress event line and is kept
in ``planner/adaptive.json``; at the end the last fit is written to ``planner/profile.json``
and its predictions, measured beside, to ``planner/plan.csv``; the layouts skipped are
"predicted, not measured" there and in the report. Layouts are keyed by ``Config.id``; an id is
never parsed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.folder.runfolder import ADAPTIVE_JSON, PLAN_CSV, PLANNER_PROFILE_JSON
from pytest_ppsweep.matrix.model import Config, Sweep
from pytest_ppsweep.planner.data import PlannerError, load_run_folder
from pytest_ppsweep.planner.fitting import Fitted, fit, prior_only
from pytest_ppsweep.planner.nextlayout import Candidate, Decision, Workload, decide
from pytest_ppsweep.planner.nextlayout import skip_third_repeat as _skip_third
from pytest_ppsweep.planner.plan import plan_rows, write_plan_csv
from pytest_ppsweep.planner.roundcost import Hardware
from pytest_ppsweep.planner.trust import fit_trust
from pytest_ppsweep.run.context import RunContext

__all__ = ["AdaptiveSweep"]

SKIPPED = "predicted, not measured"


class AdaptiveSweep:
    """The decisions of one adaptive run (serial: one process boots every layout)."""
    def __init__(self, sweep: Sweep, ids: Sequence[str], run_dir: Path, gpus: int,
                 gpus_per_node: int, tolerance: float, say: Callable[[str], None]) -> None:
        self.sweep = sweep
        self.ids = list(ids)
        self.run_dir = run_dir
        self.tolerance = tolerance
        self.say = say
        self.hardware = Hardware(gpus=gpus, gpus_per_node=gpus_per_node)
        wl = sweep.workload
        self.workload = Workload(tuple(wl.concurrency), wl.input_len, wl.num_requests,
                                 wl.repeats)
        chunk = int(sweep.server.get(engine_of(sweep.engine).knobs.chunk) or 8192)
        self.fitted: Fitted = prior_only(self.hardware, chunk)
        self.skipped: dict[str, str] = {}
        self.booted: list[str] = []
        self.decided: str | None = None
        self.log: list[dict[str, Any]] = []

    @classmethod
    def of(cls, ctx: RunContext, ids: Sequence[str], tolerance: float) -> AdaptiveSweep:
        """The adaptive sweep of a run: its sweep, run folder, progress lines and the first
        cluster's GPUs from the run's context."""
        cluster = ctx.clusters.first()
        return cls(ctx.sweep, ids, ctx.store.dir, cluster.gpus, cluster.gpus_per_node,
                   tolerance, ctx.progress)

    def _candidates(self, ids: Sequence[str]) -> list[Candidate]:
        configs: dict[str, Config] = {c.id: c for c in self.sweep.configs}
        groups = {i: configs[i].deployment.serve_group for i in ids if i in configs}
        return [Candidate(i, g.pp, g.tp) for i, g in groups.items()]

    def refit(self) -> None:
        """Refit on this run folder's valid rounds (the prior until one is there)."""
        try:
            measured = load_run_folder(self.run_dir)
        except (PlannerError, FileNotFoundError, OSError) as exc:
            self.say(f"adaptive: no refit yet ({str(exc)[:160]})")
            return
        self.fitted = fit(measured, self.hardware)

    def next_layout(self, remaining: Sequence[str]) -> str | None:
        """The layout to boot next among ``remaining`` (None: the best is decided and every
        remaining layout is skipped, with its reason)."""
        todo = [i for i in remaining if i not in self.skipped]
        if not todo:
            return None
        decision: Decision = decide(self.fitted, self._candidates(todo),
                                    self.workload, self.tolerance)
        entry = {"booted_so_far": list(self.booted), "boot": decision.boot,
                 "reason": decision.reason, "best": decision.best,
                 "not_now": dict(decision.skipped)}
        self.log.append(entry)
        if decision.boot is None:
            self.decided = decision.best
            self.say(f"adaptive: {decision.reason}")
            for cid in todo:
                why = decision.skipped.get(cid, "the best is decided")
                self.skipped[cid] = f"{SKIPPED}: {why}"
                self.say(f"adaptive: skip {cid} ({SKIPPED}): {why}")
            self._write()
            return None
        self.booted.append(decision.boot)
        self.say(f"adaptive: boot {decision.boot}: {decision.reason}")
        self._write()
        return decision.boot

    def skip_reason(self, config_id: str) -> str | None:
        return self.skipped.get(config_id)

    def third_repeat(self, config_id: str, concurrency: int, tps: list[float]) -> str | None:
        """Why the third repeat of this point can be left out, or None."""
        if self.workload.repeats != 3:
            return None
        return _skip_third(tps, self.sweep.spread_threshold, self.fitted, config_id,
                           self.workload, self.tolerance)

    def _write(self) -> None:
        path = self.run_dir / ADAPTIVE_JSON
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"tolerance": self.tolerance, "booted": self.booted,
                                    "skipped": self.skipped, "decided": self.decided,
                                    "decisions": self.log}, indent=1) + "\n", encoding="utf-8")

    def finish(self) -> list[str]:
        """Refit on everything measured; write the profile and the plan; the layouts skipped."""
        self.refit()
        self.fitted.write(self.run_dir / PLANNER_PROFILE_JSON)
        trust = fit_trust(self.fitted)
        if not trust.trusted:  # no prediction is written where the fit misses its own points
            self.say(f"adaptive: {trust.summary()}")
            for line in trust.misfits:
                self.say(f"adaptive: misfit: {line}")
            (self.run_dir / PLAN_CSV).unlink(missing_ok=True)
            self._write()
            return list(self.skipped)
        configs = {c.id: c for c in self.sweep.configs}
        groups = {i: configs[i].deployment.serve_group for i in self.ids if i in configs}
        rows = plan_rows(self.fitted, layouts=[(i, g.pp, g.tp, g.ep) for i, g in groups.items()])
        # booted but without a valid round (a boot failure, every round short): say so
        rows = [replace(r, state="booted, no valid round (prediction only)")
                if r.layout in self.booted and r.measured is None else r for r in rows]
        write_plan_csv(self.run_dir / PLAN_CSV, rows)
        self._write()
        return list(self.skipped)
