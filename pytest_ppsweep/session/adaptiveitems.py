"""The adaptive sweep inside pytest (``--ppsweep-adaptive``): the planner's decisions
(run.adaptive.AdaptiveSweep) applied to the collected items: which layout runs next, which are
skipped, and the layouts predicted but not measured out of the judged selection."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_ppsweep.folder.runfolder import RunJson
from pytest_ppsweep.session import options
from pytest_ppsweep.session.collection import _params

if TYPE_CHECKING:
    from pytest_ppsweep import continuity
    from pytest_ppsweep.run.adaptivesweep import AdaptiveSweep
    from pytest_ppsweep.run.sweeprun import SweepRun

__all__ = ["Adaptive"]


class Adaptive:
    """The session's side of --ppsweep-adaptive (serial runs only)."""

    def __init__(self, config: pytest.Config, run: SweepRun, ids: list[str],
                 plan: continuity.Plan, worker: bool) -> None:
        self.config = config
        self.run = run
        self.ids = ids
        self.plan = plan
        self.worker = worker
        self.planner: AdaptiveSweep | None = None  # set by start() with --ppsweep-adaptive

    def start(self) -> None:
        """With --ppsweep-adaptive: the planner decides the order of the layouts and which to
        skip (serial runs only: one process must see every layout's rounds)."""
        tolerance = options.adaptive_tolerance(self.config)
        if tolerance is None:
            return
        if self.worker or self.config.getoption("numprocesses", None):
            raise pytest.UsageError(
                "--ppsweep-adaptive: expected a serial run (one process decides which layout "
                "to boot after each one), found pytest-xdist -n; drop -n or the option")
        sweep = self.run.context.sweep
        several = [cid for cid in self.ids if sweep.config(cid).deployed is not None]
        if several:
            raise pytest.UsageError(
                "--ppsweep-adaptive: expected layouts of one serve group (the planner models "
                f"one server's PP/TP/EP), found {len(several)} P/D layout(s): "
                f"{', '.join(several)}; drop the option, or select other layouts")
        from pytest_ppsweep.run.adaptivesweep import AdaptiveSweep

        ctx = self.run.context
        self.planner = AdaptiveSweep.of(ctx, self.ids, tolerance)
        self.run.rounds.third_repeat = self.planner.third_repeat
        # a point whose third repeat the planner skipped has two: the verdict accepts them
        RunJson(ctx.store).adaptive(min_repeats=min(ctx.sweep.min_repeats, 2))
        ctx.progress(f"adaptive: the planner orders the layouts and stops when the best is "
                     f"decided (tolerance {tolerance:.0%})")

    def order(self, items: list[pytest.Item], start: int = 0) -> None:
        """Put the layout the planner boots next at ``items[start:]``'s front; refit first
        when a layout was just measured (``start`` > 0)."""
        if self.planner is None or self.config.option.collectonly:
            return
        blocks: dict[str, list[pytest.Item]] = {}
        others: list[pytest.Item] = []
        for item in items[start:]:
            cid = _params(item).get("ppsweep_config")
            (blocks.setdefault(str(cid), []) if cid is not None else others).append(item)
        if not blocks:
            return
        if start > 0:
            self.planner.refit()
        chosen = self.planner.next_layout(list(blocks))
        for cid in blocks:
            why = self.planner.skip_reason(cid)
            if why:
                self.plan.skip_configs[cid] = why
        order = [*([chosen] if chosen else []), *(c for c in blocks if c != chosen)]
        items[start:] = others + [item for cid in order for item in blocks[cid]]

    def after(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """After a layout's last test: refit and choose the next layout."""
        if self.planner is None:
            return
        cid = _params(item).get("ppsweep_config")
        if cid is None or (nextitem is not None
                           and _params(nextitem).get("ppsweep_config") == cid):
            return
        if self.planner.skip_reason(str(cid)):
            return
        items = item.session.items
        if item in items:
            self.order(items, items.index(item) + 1)

    def skip(self, item: pytest.Item) -> None:
        """A test of a layout the planner skipped is skipped with the reason."""
        if self.planner is None:
            return
        cid = _params(item).get("ppsweep_config")
        why = self.planner.skip_reason(str(cid)) if cid is not None else None
        if why:
            pytest.skip(f"{cid}: {why}")

    def finish(self) -> None:
        """The last fit, the plan, and the skipped layouts out of the judged selection."""
        if self.planner is None:
            return
        skipped = self.planner.finish()
        if skipped:
            self.run.context.progress(
                f"adaptive: {len(skipped)} layout(s) predicted, not measured: "
                f"{', '.join(skipped)} (planner/plan.csv)")
            RunJson(self.run.context.store).drop_skipped(self.planner.skipped)
