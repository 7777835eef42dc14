"""The decision rule of a run, read from its run.json: the test's parameters (stats/decision.py's
:class:`Rule`) as the sweep set them (``[compare] alpha``, ``min_effect_pct``, ``sequential``,
and the boot level's ``boot_noise_pct`` and ``one_boot_bound_pct``).
"""

from __future__ import annotations

import math
from dataclasses import replace

from pytest_ppsweep.folder.runfolder import CompareKey, RunJsonDict, RunKey
from pytest_ppsweep.stats.decision import DEFAULT_RULE, Rule, offset_var
from pytest_ppsweep.stats.spread import DEFAULT_MAX_REPEATS

__all__ = ["rule_of"]


def rule_of(raw: RunJsonDict, workload: str = "") -> Rule:
    """The decision rule of a run (run.json ``compare``: ``alpha``, ``min_effect_pct``, and
    the workload's planned ``repeats`` (``planned``), and with ``sequential`` the looks from
    them to ``max_repeats``;
    the defaults for a run folder written before them)."""
    given = raw.get(RunKey.COMPARE)
    if not isinstance(given, dict):
        return DEFAULT_RULE
    try:
        rule = Rule(alpha=float(given.get(CompareKey.ALPHA, DEFAULT_RULE.alpha)),
                    min_effect_pct=float(given.get(CompareKey.MIN_EFFECT_PCT,
                                                   DEFAULT_RULE.min_effect_pct)),
                    one_boot_bound_pct=float(given.get(CompareKey.ONE_BOOT_BOUND_PCT,
                                                       DEFAULT_RULE.one_boot_bound_pct)))
        stated = given.get(CompareKey.BOOT_NOISE_PCT)
        if stated is not None:
            rule = replace(rule, boot_var=offset_var(float(stated)), boot_df=math.inf,
                           boot_source=f"the stated prior [compare] boot_noise_pct = "
                                       f"{float(stated):g} %")
        named = raw.get(RunKey.WORKLOADS)
        spec = (named.get(workload) if isinstance(named, dict) and workload else None) or (
            raw.get(RunKey.WORKLOAD) or {})
        first = int(spec.get("repeats") or 0)
        rule = replace(rule, planned=first)  # the spread rule's extra rounds: Stein's level
        if given.get(CompareKey.SEQUENTIAL) is True:
            last = int(raw.get(RunKey.MAX_REPEATS) or DEFAULT_MAX_REPEATS)  # run/rounds.py's cap
            rule = replace(rule, first_look=first, last_look=max(first, last))
        return rule
    except (TypeError, ValueError, AttributeError):
        return DEFAULT_RULE
