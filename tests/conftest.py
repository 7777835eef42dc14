"""Shared fixtures of the plugin's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.paths import DATA

# shared_fixtures: the session fixtures of several folders (sglang_cpu, test_hosts)
pytest_plugins = ["pytester", "support.shared_fixtures"]


@pytest.fixture
def data_dir() -> Path:
    """Real captured artifacts (nvidia-smi on an H200, SGLang 0.5.23 server info and logs)."""
    return DATA
