"""Real SGLang on CPU across two Slurm nodes (issue 27): PP2 with one rank on each of s701 and
s702, network namespaces that talk over a bridge, as one job step of the run's allocation. The
rendezvous is node 0's address; the ranks reach each other over gloo on eth0, not loopback."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from support.paths import sweep_folder
from support.real import (
    READINESS_WORKAROUND,
    Provisioned,
    ProvisionImpossible,
    provision,
    sweep_toml,
)
from support.slurm import TestSlurm

PP2 = """
[[configs]]
pp = 2
tp = 1
"""


def slurm_cpu_toml(text: str) -> str:
    """test_matrix/cpu.toml's local cluster turned into a two-node slurm cluster."""
    start = text.index("[clusters.cpu]")
    end = text.index("[clusters.cpu.env]")
    table = re.sub(r"^hosts = .*$", "nodes = 2\nrequest_gpus = false", text[start:end],
                   count=1, flags=re.M)
    table = table.replace('kind = "local"', 'kind = "slurm"')
    text = text[:start] + table + text[end:]
    # gloo between the nodes goes over their bridge, not over loopback
    return text.replace('GLOO_SOCKET_IFNAME = "lo"', 'GLOO_SOCKET_IFNAME = "eth0"')


@pytest.fixture(scope="module")
def sglang_cpu() -> Provisioned:
    """SGLang for CPU (scripts/provision_sglang_cpu.sh; seconds when provisioned), set up
    before pytester points HOME at a temporary folder (the cache lives under the real HOME)."""
    try:
        return provision()
    except ProvisionImpossible as exc:
        pytest.skip(f"cannot provision real SGLang here: {exc}")


def test_real_sglang_pp2_across_two_slurm_nodes(
    sglang_cpu: Provisioned, pytester: pytest.Pytester, slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    prov = sglang_cpu
    text = sweep_toml(prov, port=34000, dist_port=35000, mark="slurm", configs=PP2,
                      baseline="pp2-tp1", concurrency=[2], num_requests=4, repeats=1)
    folder = sweep_folder(tmp_path / "sweep", slurm_cpu_toml(text))
    (folder / "conftest.py").write_text(READINESS_WORKAROUND)
    reports = tmp_path / "reports"
    result = pytester.runpytest_subprocess(str(folder), "-v", "--ppsweep-reports", str(reports),
                                           timeout=500)
    out = result.stdout.str()
    outcomes = result.parseoutcomes()
    assert not outcomes.get("failed") and not outcomes.get("errors"), out[-8000:]
    assert outcomes.get("passed", 0) >= 3, out[-8000:]
    run = next(p for p in reports.iterdir() if p.is_dir())
    with (run / "results.csv").open(newline="") as fh:
        results = list(csv.DictReader(fh))
    assert results and all(r["config_id"] == "pp2-tp1-ep1" for r in results)
    # N/N: every request of the round completed
    assert all(r["completed"] == r["num_requests"] for r in results), results
    # booted across both nodes: each rank bound its own node's address and logged into its file
    launch = next(run.rglob("launch.sh")).read_text()
    assert "--host 10.201.0.101" in launch and "--host 10.201.0.102" in launch
    assert "--dist-init-addr 10.201.0.101:35000" in launch
    logs = {p.name: p.read_text(errors="replace") for p in run.rglob("node*.log")}
    assert logs["node0.log"].strip() and logs["node1.log"].strip(), logs.keys()
    # topology: PP2 across 2 nodes as recorded by the run
    nodes = json.loads((run / "metadata" / "nodes-cpu.json").read_text())
    assert "s701" in json.dumps(nodes) and "s702" in json.dumps(nodes)
