"""A failed boot names the node whose log holds the root-cause line, and its summary is short
(every node's tail and every fatal line are kept beside the logs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.booting import TwoNodeBoot

from pytest_ppsweep.service.readiness import SUMMARY_LINES, BootFailed, wait_until_ready

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.33 GiB"


class _TwoNodes(TwoNodeBoot):
    """node0's log has a secondary fatal line (a traceback after its peer went away); node1's
    has the out-of-memory root cause, 8 times, and many lines of noise after."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, "booting\nTraceback (most recent call last):\n  File x\n",
                         "booting\n" + f"{OOM}\n" * 8 + "".join(f"noise {i}\n" for i in range(60)))


def test_the_root_cause_node_is_the_one_whose_log_holds_it(tmp_path: Path) -> None:
    service = _TwoNodes(tmp_path / "logs")
    with pytest.raises(BootFailed) as failed:
        wait_until_ready(service, timeout_s=30)  # type: ignore[arg-type]
    exc = failed.value
    assert exc.reason.startswith(f"fatal line in node1's log: {OOM}"), exc.reason
    summary = str(exc).splitlines()
    assert len(summary) <= SUMMARY_LINES, str(exc)
    assert summary[0] == f"pp2-tp1-ep1: boot failed: {exc.reason}"
    assert summary[2] == f"  node1.log:2: [cuda-oom] {OOM}", summary
    assert any(line.startswith("--- node1.log (last ") for line in summary), summary
    assert "noise 59" in str(exc) and "node0.log (last" not in str(exc)
    # everything stays beside the node logs
    assert exc.evidence_path == tmp_path / "logs" / "boot-failure.txt"
    kept = exc.evidence_path.read_text()
    assert kept.count(OOM) >= 8 + 1 and "--- node0.log (last 25 lines) ---" in kept
    assert "Traceback (most recent call last)" in kept
