"""Student's t (stats/studentt.py) against scipy's values (taken once, scipy is not a
dependency)."""

from __future__ import annotations

import math

import pytest

from pytest_ppsweep.stats.studentt import t_ppf, t_sf


@pytest.mark.parametrize(("df", "t", "want"), [
    (1, 2.0, 0.14758361765043326), (4, 2.776, 0.02501138915998821),
    (7.5, 1.3, 0.11606338940780439), (30, -0.5, 0.6896384975574363)])
def test_t_survival_matches_scipy(df: float, t: float, want: float) -> None:
    assert math.isclose(t_sf(t, df), want, rel_tol=1e-9)


@pytest.mark.parametrize(("df", "q", "want"), [
    (2, 0.975, 4.302652729749462), (4, 0.95, 2.1318467863266495),
    (14, 0.995, 2.9768427343708344), (100, 0.9, 1.290074761346516)])
def test_t_quantile_matches_scipy(df: float, q: float, want: float) -> None:
    assert math.isclose(t_ppf(q, df), want, rel_tol=1e-9)
    assert math.isclose(t_ppf(1 - q, df), -want, rel_tol=1e-9)
