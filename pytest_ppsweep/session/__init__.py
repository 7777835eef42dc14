"""Step 9, the pytest-aware glue: :class:`~pytest_ppsweep.session.owner.SweepSession`, the one
owner of a run under its typed stash key, its run's life (runstate: a state machine) and the
objects it holds, one per concern: options (command line and ini), setup (run folder, plan and
the slurm allocation), collection (parametrize, deselect, the selection), noboot (runs in which
nothing boots), preflight and claims (leftovers, node checks, the final reap), signals, xdist
(one worker per cluster), progress (the live status and progress.log), adaptiveitems (the planner's
order applied to the items) and render (the summary shown).
"""

from __future__ import annotations
