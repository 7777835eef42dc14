"""The gate's noise rule. Its one home is ``results/noise.py`` (the decisions of a run use the
same rule on its own repeats, and the results layer comes before the gate); this module keeps
the gate's import path."""

from __future__ import annotations

from pytest_ppsweep.results.noise import NOISE_K, NOISE_RULE, deviations_pct, noise_pct

__all__ = ["NOISE_K", "NOISE_RULE", "deviations_pct", "noise_pct"]
