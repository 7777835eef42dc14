"""What a run takes over from an earlier one: reuse of identical layouts, resume of a run.

Decided once on the controller, before anything boots, and handed to xdist workers as plain
lists, so every process collects and skips the same items.

* Reuse (``--ppsweep-reuse RUN``): a layout whose manifest is identical field by field to the
  reference's (and whose reference rounds are all N/N) is not booted; its rows, facts and
  evidence are copied in and marked ``reused``. Every difference that prevents reuse is listed.
* Resume (``--ppsweep-resume RUN``): the run continues in its own folder; finished rounds are
  kept and only the unfinished points run. A changed layout refuses the resume.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_ppsweep.continuity import manifest, outcomes
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.model import Cluster, Config, NoClusterFits, Sweep, cluster_for


@dataclass
class Plan:
    """Which layouts and points need no run, and why; which rounds are already done."""

    skip_configs: dict[str, str] = field(default_factory=dict)
    skip_points: dict[str, str] = field(default_factory=dict)  # "<config id>-c<C>" → why
    done: set[tuple[str, int, int]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    # config id → the run whose rounds it keeps (this run's id on a resume, the reference's on
    # a reuse): its skipped tests are shown as ``reused <run id>``
    reused_from: dict[str, str] = field(default_factory=dict)

    def as_builtin(self) -> dict[str, object]:
        """For xdist's workerinput: builtins only."""
        return {
            "skip_configs": dict(self.skip_configs),
            "skip_points": dict(self.skip_points),
            "done": sorted([list(d) for d in self.done]),
            "reused_from": dict(self.reused_from),
        }

    @classmethod
    def from_builtin(cls, data: dict[str, object]) -> Plan:
        done = data.get("done") or []
        assert isinstance(done, list)
        return cls(
            skip_configs=dict(data.get("skip_configs") or {}),  # type: ignore[call-overload]
            skip_points=dict(data.get("skip_points") or {}),  # type: ignore[call-overload]
            done={(str(c), int(k), int(r)) for c, k, r in done},
            reused_from=dict(data.get("reused_from") or {}),  # type: ignore[call-overload]
        )


class ContinuityError(ValueError):
    """The earlier run cannot be continued or reused as asked; the message says why."""


def _cluster_for(pool: tuple[Cluster, ...], config: Config) -> Cluster:
    # A layout no cluster of the pool fits has no manifest to compare: say so, never guess one.
    try:
        return cluster_for(pool, config)
    except NoClusterFits as exc:
        raise ContinuityError(f"{exc}; cannot compare its manifest") from None


def resume(sweep: Sweep, pool: tuple[Cluster, ...], store: RunStore, ids: list[str]) -> Plan:
    """Keep the finished rounds of ``store``'s run; refuse when a layout changed since."""
    from pytest_ppsweep.cluster.reap import reap_local

    # A run killed without cleanup may have left ranks holding the ports: stop them first.
    reaped = reap_local(store.run_id)
    with store.locked():
        manifest.repair_torn_tail(store.dir)
    plan = Plan(done=manifest.finished_rounds(store.dir))
    if reaped:
        plan.notes.append(f"stopped {len(reaped)} rank process(es) left by the interrupted run")
    facts = store.config_rows()
    for cid in ids:
        cfg = sweep.config(cid)
        w = sweep.workload_of(cfg)
        stored = manifest.load(store.dir, cid)
        if stored is not None:
            diff = manifest.differences(stored, manifest.build(sweep, _cluster_for(pool, cfg), cfg))
            if diff:
                raise ContinuityError(
                    f"--ppsweep-resume {store.dir}: {cid} changed since it ran: " + "; ".join(diff)
                )
        points = 0
        rounds = w.repeats * sweep.boots  # [sweep] boots: the rounds of every boot
        for conc in w.concurrency:
            if all((cid, conc, r) in plan.done for r in range(1, rounds + 1)):
                plan.skip_points[f"{cid}-c{conc}"] = f"all {rounds} rounds done in this run"
                plan.reused_from[cid] = store.run_id
                points += 1
        checked = all(facts.get(cid, {}).get(k) for k in ("topology_ok", "log_clean"))
        # the plugin's record of the layout's tests, when there is one: all ran, none failed
        checked = checked and outcomes.finished(store.dir, cid) is not False
        if points == len(w.concurrency) and checked:
            plan.skip_configs[cid] = "done in this run (resumed)"
    plan.notes.append(
        f"resuming {store.run_id}: {len(plan.done)} round(s) kept, "
        f"{len(plan.skip_configs)} layout(s) complete"
    )
    return plan


def reuse(
    sweep: Sweep, pool: tuple[Cluster, ...], store: RunStore, ids: list[str], ref: Path, plan: Plan
) -> Plan:
    """Adopt every layout of ``ref`` whose manifest is identical; list why the others are not."""
    for cid in ids:
        if cid in plan.skip_configs or any(d[0] == cid for d in plan.done):
            continue
        cfg = sweep.config(cid)
        wanted = manifest.build(sweep, _cluster_for(pool, cfg), cfg)
        ok, reasons = manifest.reusable(ref, cid, wanted)
        if not ok:
            plan.notes.append(f"{cid}: not reused from {ref.name}: " + "; ".join(reasons))
            continue
        taken = manifest.adopt(ref, store, cid, wanted)
        plan.skip_configs[cid] = f"reused from {ref.name}: identical manifest, {taken} rounds N/N"
        plan.reused_from[cid] = ref.name
        plan.notes.append(f"{cid}: reused {taken} rounds from {ref}")
    return plan
