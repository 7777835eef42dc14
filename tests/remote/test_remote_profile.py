"""The profile window through Docker over SSH on the namespace hosts: each container writes its
traces into the bind-mounted ``[profile] output_dir`` on its node, and the plugin fetches every
rank's trace over SFTP into ``profile/<layout>/``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.remote import IMAGE, small_matrix

PP8 = """
[[configs]]
pp = 8
tp = 4
"""


def test_profile_traces_come_back_from_every_node_over_sftp(
    pytester: pytest.Pytester,
    sweep_folder: Callable[..., Path],
    work: dict[str, Path],
    tmp_path: Path,
) -> None:
    on_nodes = tmp_path / "on-the-nodes"
    matrix = small_matrix("ns", work["model"], work["devices"], configs=PP8)
    matrix = matrix.replace("concurrency = [2, 4]", "concurrency = [2]")
    matrix += f'\n[profile]\noutput_dir = "{on_nodes}"\ntimeout_s = 30\n'
    folder = sweep_folder(matrix, launcher="docker")
    reports = tmp_path / "reports"
    result = pytester.runpytest_subprocess(
        folder, "-v", "--ppsweep-image", IMAGE, "--ppsweep-reports", reports,
        "--ppsweep-repeats", "1", timeout=600,
    )
    out = result.stdout.str()
    assert "test_profile[pp8-tp4-ep4] PASSED" in out, out[-6000:]
    run = next(p for p in reports.iterdir() if p.is_dir())
    cid = "pp8-tp4-ep4"
    body = json.loads((run / "profile" / cid / "request.json").read_text())
    # the ranks wrote on their nodes (not into the run folder) ...
    assert body["output_dir"] == f"{on_nodes}/{run.name}/{cid}"
    # ... into the folder bind-mounted into every container ...
    docker_run = (run / "service" / cid / "node3.docker-run.sh").read_text()
    assert f"-v {on_nodes}:{on_nodes}:rw" in docker_run
    # ... and each node's ranks came back over SFTP (8 per node)
    traces = sorted((run / "profile" / cid).glob("*.trace.json.gz"))
    assert len(traces) == 32
    attribution = json.loads((run / "profile" / cid / "attribution.json").read_text())
    assert len(attribution["stable"]) == 32 and attribution["calls"]["all_reduce"] > 0
