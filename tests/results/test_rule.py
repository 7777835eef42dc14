"""A run's decision rule read from its run.json (results/rule.py)."""

from __future__ import annotations

from pytest_ppsweep.results.rule import rule_of
from pytest_ppsweep.stats.decision import DEFAULT_RULE


def test_rule_of_reads_the_looks_from_run_json() -> None:
    raw = {"compare": {"alpha": 0.05, "min_effect_pct": 1.0, "sequential": True},
           "max_repeats": 8, "workload": {"repeats": 3},
           "workloads": {"long": {"repeats": 4}}}
    assert (rule_of(raw).first_look, rule_of(raw).last_look) == (3, 8)
    assert (rule_of(raw, "long").first_look, rule_of(raw, "long").last_look) == (4, 8)
    assert rule_of({**raw, "compare": {"alpha": 0.05}}).looks == 1
    assert rule_of({}) == DEFAULT_RULE
