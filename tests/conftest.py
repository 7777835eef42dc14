"""Shared fixtures of the plugin's own tests."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from support.paths import DATA

# shared_fixtures: the session fixtures of several folders (sglang_cpu, test_hosts); halves: the
# suite's machine and private halves, which scripts/test.sh runs side by side
pytest_plugins = ["pytester", "support.shared_fixtures", "support.halves"]

# A suite started as a background job (`cmd &` in a script) inherits SIGINT ignored, and every
# sweep it starts would too (an ignored signal stays ignored across exec): its Ctrl-C tests could
# not interrupt anything. A Ctrl-C is what they test, so the suite takes Python's default back;
# the sweeps it starts then begin with it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def data_dir() -> Path:
    """Real captured artifacts (nvidia-smi on an H200, SGLang 0.5.23 server info and logs)."""
    return DATA
