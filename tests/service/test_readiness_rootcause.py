"""A boot failure is named where it happened even when the failing node's own line and exit
arrive after another node's line about it (the chaos cell custom_ar_graph under load): the wait
lets the other nodes' last lines and exits in before it names the node (issue 28, point 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.booting import TwoNodeBoot

from pytest_ppsweep.service.readiness import BootFailed, wait_until_ready
from pytest_ppsweep.sim.launch.faultlog import (
    SIGQUIT_LINE,
    custom_ar_capture_error,
    peer_lost_error,
)

DEAD = "Rank 1 scheduler is dead. Please check if there are relevant logs."


class _LateCulprit(TwoNodeBoot):
    """Two nodes: node 0's log already tells of node 1's death; node 1's own fatal line and
    both exits come only at the ``late``-th look at the exits (what a loaded machine does:
    node 1's last lines not flushed or read yet when node 0's were)."""

    def __init__(self, folder: Path, late: int, own: str, code: int) -> None:
        super().__init__(folder, "booting\n" + "\n".join(
            [peer_lost_error("node_rank 1 exited"), DEAD, SIGQUIT_LINE, "Killed"]) + "\n",
            "booting\nCapture cuda graph begin\n")
        self.late, self.own, self.code, self.looks = late, own, code, 0

    def exited(self) -> list[tuple[int, int]]:
        self.looks += 1
        if self.looks < self.late:
            return []
        if self.looks == self.late:
            with self._logs[1].open("a") as fh:
                fh.write(self.own)
        return [(0, 1), (1, self.code)]


def test_node1s_own_line_read_after_node0s_consequence_names_node1(tmp_path: Path) -> None:
    service = _LateCulprit(tmp_path / "logs", late=3, own=custom_ar_capture_error() + "\n",
                           code=1)
    with pytest.raises(BootFailed) as failed:
        wait_until_ready(service, timeout_s=30)  # type: ignore[arg-type]
    exc = failed.value
    assert exc.reason.startswith(
        "node1 exited with code 1, node0 exited with code 1: "
        "Exception: Capture cuda graph failed: invalid argument"), exc.reason
    summary = str(exc).splitlines()
    assert "node1.log" in summary[2] and "[engine]" in summary[2], summary
    assert any(line.startswith("--- node1.log (last ") for line in summary), summary


def test_a_node_killed_without_a_line_is_named_over_the_others_lines_about_it(
    tmp_path: Path,
) -> None:
    service = _LateCulprit(tmp_path / "logs", late=2, own="", code=-9)
    with pytest.raises(BootFailed) as failed:
        wait_until_ready(service, timeout_s=30)  # type: ignore[arg-type]
    exc = failed.value
    assert exc.reason.startswith("node1 exited with code -9 (SIGKILL), node0 exited with code 1"
                                 ), exc.reason
    assert any(line.startswith("--- node1.log (last ") for line in str(exc).splitlines())
