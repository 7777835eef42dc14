"""Fixtures of the remote-backend tests: real sshd and dockerd on four namespace hosts.

``test_hosts`` (tests/support/shared_fixtures.py, shared with tests/e2e) provisions them once per
session with the project's own scripts (scripts/provision_test_hosts.sh --docker,
scripts/build_sim_image.sh) and tears them down at the end (set PPSWEEP_KEEP_TEST_HOSTS=1 to keep
them for the next run). The tests skip only when not run as root; any other provisioning failure
fails them with the script's output.
After every test each host is checked: no rank container and no rank process may be left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.paths import ACCEPTANCE
from support.remote import (
    TestHosts,
    clean,
    cluster_toml,
    leftovers,
    make_device_dir,
)


@pytest.fixture(autouse=True)
def nothing_left_on_the_hosts(test_hosts: TestHosts) -> Iterator[None]:
    """Every scenario must leave no rank container or process on any host."""
    yield
    left = leftovers(test_hosts)
    if left:
        clean(test_hosts)
    assert not left, "left on the test hosts:\n" + "\n".join(left)


@pytest.fixture
def work(tmp_path: Path) -> dict[str, Path]:
    """A model folder, a stand-in device folder and an emulator GPU-state folder."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    state = tmp_path / "simstate"
    state.mkdir()
    return {"model": model, "devices": make_device_dir(tmp_path / "dev"), "state": state}


@pytest.fixture
def sweep_folder(
    pytester: pytest.Pytester, test_hosts: TestHosts, work: dict[str, Path]
) -> Callable[..., Path]:
    """Write a sweep folder (matrix + the project's acceptance tests) for the test hosts."""
    counter = iter(range(100))

    def make(matrix: str, *, launcher: str, scale: float = 1000, **cluster: object) -> Path:
        folder = pytester.path / f"sweep{next(counter)}"
        folder.mkdir()
        table = cluster_toml(
            test_hosts, name="ns", launcher=launcher, state=work["state"], scale=scale, **cluster
        )
        (folder / "ppsweep.toml").write_text(matrix + "\n" + table)
        (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
        return folder

    return make
