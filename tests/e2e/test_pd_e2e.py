"""A prefill/decode disaggregated layout on the emulator behind the real sglang-router, through
the whole plugin: test_matrix/pd.toml as shipped (its cluster moved to loopback addresses of its
own), the seeds' PP8 and one P/D layout selected by id.

What must hold: the P/D layout's tests are named by its id (``-k d1`` selects it); each server
group boots with its role's flags on its own nodes and passes the topology check against its own
shape (its server info kept per group); the router is started by the launcher, logs beside the
ranks and is the benchmark's target; every round completes N/N through it; the log scan covers
every group and the router; and nothing is left running: no rank, no router, no listener."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from support.matrices import emulated_cluster, replace_once
from support.paths import REPO, sweep_folder
from support.processes import child_env
from support.runs import rows

from pytest_ppsweep.cluster.reap import find_local

PD = "p1-pp4tp4ep4-d1-tp16ep4"
NET = "127.0.62"


def _sweep(tmp_path: Path, port: int) -> Path:
    text = (REPO / "test_matrix" / "pd.toml").read_text()
    text = replace_once(text, 'extends = "cluster.toml"\n', "")
    text = replace_once(text, '[clusters.local.env]\nPPSWEEP_SIM_TIME_SCALE = "20"\n\n'
                        '[clusters.local-b.env]\nPPSWEEP_SIM_TIME_SCALE = "20"\n', "")
    text = replace_once(text, "port = 30080", f"port = {port + 80}")
    # time scale 100 (a boot in seconds): the rounds' spread then measures this machine's load,
    # and this test checks the deployment, not the spread rule
    text = replace_once(text, "spread_threshold = 0.02", "spread_threshold = 1e9")
    text += emulated_cluster("local", NET, port, port + 5000, 100, tmp_path / "sim-state")
    return sweep_folder(tmp_path / "sweep", text)


def _listening(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def test_a_pd_layout_boots_each_role_behind_the_router_and_leaves_nothing(
        tmp_path: Path) -> None:
    port = 33000 + (os.getpid() % 200) * 10
    folder, reports = _sweep(tmp_path, port), tmp_path / "reports"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-p", "no:cacheprovider", "-v",
         "--ppsweep-reports", str(reports), "--ppsweep-run-id", "pd", "--ppsweep-requests", "8",
         "--ppsweep-repeats", "2", "--ppsweep-config", f"pp8,{PD}"],
        capture_output=True, text=True, timeout=900, check=False, cwd=folder, env=child_env())
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-6000:]
    assert re.search(rf"test_prefill\[{PD}-c16\] PASSED", out), out[-3000:]
    run = reports / "pd"
    meta = run / "metadata"
    # each group's own server info: its role and its own shape
    prefill = json.loads((meta / f"{PD}.prefill0.server_info.json").read_text())
    decode = json.loads((meta / f"{PD}.decode0.server_info.json").read_text())
    assert (prefill["disaggregation_mode"], prefill["pp_size"], prefill["tp_size"]) == (
        "prefill", 4, 4)
    assert (decode["disaggregation_mode"], decode["pp_size"], decode["tp_size"]) == (
        "decode", 1, 16)
    groups = json.loads((meta / f"{PD}.groups.json").read_text())["groups"]
    # the groups on disjoint nodes, then the router's own log scan
    assert [(g["label"], g["role"]) for g in groups] == [
        ("prefill0", "prefill"), ("decode0", "decode"), ("router", "router")]
    assert [g["hosts"] for g in groups[:2]] == [[f"{NET}.1", f"{NET}.2"],
                                                [f"{NET}.3", f"{NET}.4"]]
    assert all(g["log_scan"]["fatal_lines"] == 0 for g in groups), groups
    configs = {r["config_id"]: r for r in rows(run / "configs.csv")}
    assert configs[PD]["topology_ok"] == "True" and configs[PD]["log_clean"] == "True"
    # the router: started by the launcher on node 0, logged beside the ranks, the target
    service = run / "service" / PD
    assert {p.name for p in service.iterdir()} >= {
        "prefill0-node0.log", "prefill0-node1.log", "decode0-node0.log", "decode0-node1.log",
        "router.log", "launch.sh"}
    assert "Starting router on" in (service / "router.log").read_text()
    manifest = json.loads((meta / f"{PD}.manifest.json").read_text())
    assert [g["role"] for g in manifest["deployment"]["groups"]] == ["prefill", "decode"]
    # every round N/N through the router, with decode tokens
    mine = [r for r in rows(run / "results.csv") if r["config_id"] == PD]
    assert len(mine) >= 4
    assert all(r["completed"] == r["num_requests"] == "8" and r["failed"] == "0" for r in mine)
    assert all(int(r["output_tokens"]) == 8 * 256 for r in mine), mine[0]
    # a comparison with the aggregated layout studies the deployment: not confounded
    assert f"CONFOUNDED pp8-tp4-ep4 → {PD}" not in out
    # nothing left
    assert not find_local("pd")
    assert not _listening(f"{NET}.1", port + 80) and not _listening(f"{NET}.1", port)


def test_steps_defined_for_one_serve_group_skip_or_refuse_a_pd_layout(tmp_path: Path) -> None:
    """The profile window and the all-reduce benchmark are skipped on a P/D layout with the
    reason (nothing boots for them); the adaptive planner refuses a selection with one, naming
    it, before anything starts."""
    folder = _sweep(tmp_path, 33000 + (os.getpid() % 200) * 10)
    base = [sys.executable, "-m", "pytest", str(folder), "-p", "no:cacheprovider",
            "--ppsweep-reports", str(tmp_path / "reports"), "--ppsweep-config", PD]
    res = subprocess.run([*base, "-rs", "--ppsweep-comm", "--ppsweep-profile",
                          "-k", "test_comm or test_profile"], capture_output=True, text=True,
                         timeout=300, check=False, cwd=folder, env=child_env())
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert f"{PD}: the all-reduce benchmark runs on one serve group's TP domains; a layout " \
        "of 2 server groups (P/D) is not supported by this step yet" in out, out[-3000:]
    assert f"{PD}: the profile window attributes one serve group's ranks" in out
    assert "booting" not in out
    res = subprocess.run([*base, "--ppsweep-adaptive"], capture_output=True, text=True,
                         timeout=300, check=False, cwd=folder, env=child_env())
    assert res.returncode == 4, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"--ppsweep-adaptive: expected layouts of one serve group (the planner models one " \
        f"server's PP/TP/EP), found 1 P/D layout(s): {PD}" in res.stderr
    assert not find_local("pd")
