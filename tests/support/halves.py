"""The suite in two halves that scripts/test.sh runs side by side, so that one half's waits (an
emulated sweep sleeps through its emulated time, a boot polls) overlap the other's work:

* ``machine``: the tests that need this machine's shared things, in its own namespaces: the
  provisioned engines and their real boots (SGLang, vLLM, torch's gloo), the namespace test
  hosts with their sshd and dockerd, and the test Slurm. A test is here when it asks for one of
  :data:`MACHINE_FIXTURES`, lives in one of :data:`MACHINE_FOLDERS`, or carries the ``machine``
  mark (a test that reaches one of them another way: ``request.getfixturevalue``, its own
  ``provision()``).
* ``private``: every other test, started by scripts/test.sh inside network, PID and mount
  namespaces of its own (``unshare``): its loopback addresses and ports, the processes it can
  see (and kill) and its cluster claims (a tmpfs on /tmp/ppsweep-claims) are its own, so
  nothing it starts can meet what the machine half starts. The machine half's emulated
  sweeps take ports no private test uses (25000-26999, support.sweepdirs): that half sees every
  process of the machine, the private half's too, and finds leftover ranks by their ``--port``.

``PPSWEEP_TEST_HALF=machine|private`` selects one half; unset, a run holds every test (a
developer running one file or folder).
"""

from __future__ import annotations

import os

import pytest

HALF_ENV = "PPSWEEP_TEST_HALF"
HALVES = ("machine", "private")
MACHINE_FIXTURES = frozenset({"sglang_cpu", "vllm_cpu", "cpu_sweep", "vllm_sweep", "test_hosts",
                              "sglang_image", "test_slurm"})
MACHINE_FOLDERS = frozenset({"remote", "real"})


_HALF: list[str | None] = [None]  # read once, by pytest_configure


def half() -> str | None:
    """The half this run holds (None: every test)."""
    return _HALF[0]


def _take_half() -> None:
    """Read the half from the environment and take the variable out of it: the pytest runs a
    test starts (a sweep, a folder collected alone) are whole runs of their own, not halves."""
    want = os.environ.pop(HALF_ENV, "") or None
    if want is not None and want not in HALVES:
        raise pytest.UsageError(f"{HALF_ENV}={want!r}: expected one of {', '.join(HALVES)} "
                                "or unset (every test)")
    _HALF[0] = want


def half_of(item: pytest.Item) -> str:
    """``machine`` or ``private``: where this test runs (see the module's docstring)."""
    folder = item.path.relative_to(item.config.rootpath / "tests").parts[0]
    if (item.get_closest_marker("machine") is not None or folder in MACHINE_FOLDERS
            or MACHINE_FIXTURES & set(getattr(item, "fixturenames", ()))):
        return "machine"
    return "private"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "machine: needs this machine's shared things (a provisioned engine, the test "
        "hosts, the test Slurm): runs in the machine half (tests/support/halves.py)")
    _take_half()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    want = half()
    if want is None:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:  # each item's half decided once
        (keep if half_of(item) == want else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
