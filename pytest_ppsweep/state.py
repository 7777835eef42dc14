"""Stash keys shared by the plugin glue and the fixtures."""

from __future__ import annotations

import pytest

from pytest_ppsweep.sweeprun import SweepRun

RUN_KEY = pytest.StashKey[SweepRun]()

