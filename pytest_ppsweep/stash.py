"""Stash keys shared by the plugin glue and the fixtures."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the plugin imports the measuring modules only when a sweep is active
    from pytest_ppsweep.sweeprun import SweepRun

RUN_KEY: pytest.StashKey[SweepRun] = pytest.StashKey()

