"""The gate's noise rule. Its one home is ``results/noise.py`` (the results layer comes before
the gate, and the SLO answer uses it too); this module keeps the gate's import path. The gate
keeps this calibrated rule rather than the decisions' interval (results/stats.py): it compares
two boots, whose drift the repeats of one run do not show (README, "Gating a new server
image")."""

from __future__ import annotations

from pytest_ppsweep.results.noise import NOISE_K, NOISE_RULE, deviations_pct, noise_pct

__all__ = ["NOISE_K", "NOISE_RULE", "deviations_pct", "noise_pct"]
