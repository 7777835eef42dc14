"""``[compare] alpha`` and ``min_effect_pct``: the decision rule's level and equivalence margin
(stats/decision.py), read, bounded with file and key named, and written to run.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ppsweep.matrix.model import Sweep
from pytest_ppsweep.results.rule import rule_of
from pytest_ppsweep.stats.decision import DEFAULT_RULE
from tests.matrix.test_axes import error_of, sweep_of


def test_defaults_and_given_values(tmp_path: Path) -> None:
    plain = sweep_of(tmp_path, "")
    assert isinstance(plain, Sweep)
    assert (plain.compare_alpha, plain.compare_min_effect_pct) == (0.05, 1.0)
    given = sweep_of(tmp_path, "[compare]\nalpha = 0.01\nmin_effect_pct = 2.5\n")
    assert isinstance(given, Sweep)
    assert (given.compare_alpha, given.compare_min_effect_pct) == (0.01, 2.5)


@pytest.mark.parametrize(("extra", "expected"), [
    ("[compare]\nalpha = 0\n", "key 'compare.alpha': expected a significance level in (0, 0.5]"),
    ("[compare]\nalpha = 0.9\n", "key 'compare.alpha': expected a significance level"),
    ("[compare]\nalpha = \"5%\"\n", "key 'compare.alpha': expected a number"),
    ("[compare]\nmin_effect_pct = 0\n", "key 'compare.min_effect_pct': expected a margin in %"),
    ("[compare]\nmin_effect_pct = 150\n", "key 'compare.min_effect_pct': expected a margin"),
    ("[compare]\nalpah = 0.05\n", "compare.alpah"),
    ("[compare]\nboot_noise_pct = -1\n",
     "key 'compare.boot_noise_pct': expected the σ of one boot's offset in % in [0, 100)"),
    ("[compare]\none_boot_bound_pct = 0\n",
     "key 'compare.one_boot_bound_pct': expected a bound in % in (0, 100)"),
])
def test_bad_values_name_file_and_key(tmp_path: Path, extra: str, expected: str) -> None:
    message = error_of(tmp_path, extra)
    assert message.startswith(str(tmp_path / "s.toml")), message
    assert expected in message, message


def test_the_rule_read_back_from_run_json() -> None:
    assert rule_of({}) == DEFAULT_RULE  # a run folder from before the keys
    rule = rule_of({"compare": {"alpha": 0.01, "min_effect_pct": 2.0}})
    assert (rule.alpha, rule.min_effect_pct) == (0.01, 2.0)
    assert rule_of({"compare": {"alpha": "x"}}) == DEFAULT_RULE
    # the boot level's keys: a stated prior is a source with infinite degrees of freedom
    booted = rule_of({"compare": {"boot_noise_pct": 1.5, "one_boot_bound_pct": 4.0}})
    assert booted.boot_known and booted.one_boot_bound_pct == 4.0
    assert "boot_noise_pct = 1.5 %" in booted.boot_source and not rule_of({}).boot_known
