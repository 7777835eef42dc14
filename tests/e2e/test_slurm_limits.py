"""A Slurm limit does not end the sweep, on the real test Slurm (issue 38, point 5): before each
layout the allocation's time left is compared with the layout's ETA + ``time_margin_s``, and its
nodes are checked; a short allocation, or one that lost a node, is released and a new one asked
for (without the failed node), or, with ``on_limit = "stop"``, the run stops with the command
that resumes it. The emulator stands in for the engine.

Slurm's --time is in minutes, so the tests use ``time = "1"`` with ``time_margin_s = 60``: after
the first layout, an allocation always has less than ETA + 60 s left, so the second layout always
needs a new one, whatever the machine's speed. The first layout starts in a fresh allocation,
which is never renewed for lack of time (another would have no more): it is said, and it starts.
The run's claim on the nodes (cluster/claim.py) moves to the new allocation's nodes, and the new
nodes get the first nodes' preflight before the next layout boots there. After each
test there are 0 allocations, 0 steps and 0 tasks (slurm_clean)."""

from __future__ import annotations

import csv
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from support.paths import sweep_folder
from support.processes import wait_until
from support.slurm import (
    TestSlurm,
    allocations_granted,
    node_back,
    slurm,
    slurm_cluster_toml,
    two_layout_sweep,
)

from pytest_ppsweep.cluster.claim import CLAIM_DIR

A, B = "pp2-tp8-ep4", "pp4-tp4-ep4"
SHORT = 'time = "1"\ntime_margin_s = 60'


def make_folder(tmp_path: Path, extra: str, *, input_len: int = 512, requests: int = 40,
                repeats: int = 1) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    state = tmp_path / "simstate"
    state.mkdir()
    text = two_layout_sweep("slurmlimit", model, "slurm", input_len=input_len,
                            requests=requests, repeats=repeats)
    return sweep_folder(tmp_path / "sweep", text + slurm_cluster_toml(
        "slurm", state, nodes=2, extra=extra, request_gpus=True))


def start(folder: Path, reports: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
         "--ppsweep-reports", str(reports), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        cwd=folder,
    )


def finish(proc: subprocess.Popen[str], timeout_s: float = 240) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return out


def the_run(reports: Path) -> Path:
    runs = [p for p in reports.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def said(out: str, reports: Path) -> str:
    """pytest's output and the run's progress.log (where the progress lines go off a TTY)."""
    logs = [p.read_text() for p in reports.glob("*/progress.log")]
    return out + "\n".join(logs)


def layouts_measured(run: Path) -> set[str]:
    path = run / "results.csv"
    if not path.exists():
        return set()
    with path.open(newline="") as fh:
        return {row["config_id"] for row in csv.DictReader(fh)}


def claims_of(run_id: str) -> list[str]:
    """The claim files (cluster/claim.py, on the nodes' shared /tmp) that name run ``run_id``."""
    return sorted(p.name for p in Path(CLAIM_DIR).glob("*.json")
                  if f'"run_id": "{run_id}"' in p.read_text(errors="replace"))


def requests_seen(reports: Path, config: str) -> int:
    if not reports.is_dir():
        return 0
    return sum(len(p.read_text().splitlines())
               for p in reports.glob(f"*/raw/{config}/*.jsonl"))


def test_a_short_time_limit_renews_the_allocation_before_the_next_layout(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    folder = make_folder(tmp_path, SHORT)
    granted = allocations_granted()
    out = said(finish(start(folder, tmp_path / "reports")), tmp_path / "reports")
    assert " passed" in out and "failed" not in out, out[-6000:]
    # the fresh allocation is used for the first layout, said to be short; before the second,
    # it is released and a new one is made
    # (said only when the fresh allocation's clock already ran below 60 s: not asserted)
    # (a WARNING line is on the terminal and in progress.log alike: counted once)
    assert len({line for line in out.splitlines()
                if "it was made for this layout, a new one would have no more time" in line}
               ) <= 1, out[-6000:]
    assert re.search(r"allocation \d+ has \d+ s left, fewer than the next layout needs \(ETA "
                     r"\d+ s \+ time_margin_s 60 s\); on_limit = \"renew\": releasing it", out), (
        out[-6000:])
    new = re.search(r"cluster slurm: new allocation \d+ on (s70\d, s70\d)", out)
    assert new is not None, out[-6000:]
    assert allocations_granted() - granted == 2
    run = the_run(tmp_path / "reports")
    assert layouts_measured(run) == {A, B}
    # the run's claim went with the nodes (its heartbeat and release through the new
    # allocation): said, and no claim file of the run is left on any node
    assert f"cluster slurm: the run's claim moved to {new.group(1)}" in out, out[-6000:]
    assert claims_of(run.name) == []
    # the new nodes got the first nodes' preflight before B booted there
    assert "cluster slurm: the new nodes passed the preflight" in out, out[-6000:]
    assert out.index("the new nodes passed the preflight") < out.index(f"{B}: booting"), (
        out[-6000:])


def test_on_limit_stop_stops_with_the_resume_command_and_the_resume_finishes(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    folder = make_folder(tmp_path, SHORT + '\non_limit = "stop"')
    reports = tmp_path / "reports"
    proc = start(folder, reports)
    out = said(finish(proc), reports)
    assert proc.returncode == 2, out[-6000:]  # interrupted: resumable
    assert re.search(rf"{B}: cluster slurm: allocation \d+ has \d+ s left, fewer than the next "
                     r"layout needs .*on_limit = \"stop\": stopping", out), out[-6000:]
    run = the_run(reports)
    assert layouts_measured(run) == {A}
    resume = re.search(r"resume: (pytest .*--ppsweep-resume \S+)", out)
    assert resume is not None and run.name in resume.group(1), out[-6000:]
    argv = shlex.split(resume.group(1))
    resumed = start(folder, reports, *argv[argv.index("--ppsweep-resume"):])
    out = said(finish(resumed), reports)
    assert resumed.returncode == 0, out[-6000:]
    assert layouts_measured(run) == {A, B}


def _down_while_measuring(cluster: TestSlurm, tmp_path: Path, extra: str
                          ) -> tuple[subprocess.Popen[str], str, str]:
    """The sweep started; a node of A's step set DOWN while A sends requests. Returns the
    process, its output and the node."""
    folder = make_folder(tmp_path, extra, input_len=4096, requests=300, repeats=2)
    reports = tmp_path / "reports"
    proc = start(folder, reports)
    node = ""
    try:
        wait_until(lambda: requests_seen(reports, A) >= 3, 120, f"{A}'s first requests")
        nodes = slurm("squeue", "--noheader", "--name", f"ppsweep-{the_run(reports).name}+slurm",
                      "--format", "%N").strip()
        node = slurm("scontrol", "show", "hostnames", nodes).split()[1]
        slurm("scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=ppsweep-test")
        # DOWN ends the allocation; drained, the node stays out as a failed node of a real
        # cluster does (the test Slurm's ReturnToService=2 returns a DOWN node at once)
        slurm("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=ppsweep-test")
        out = said(finish(proc), reports)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        if node:
            node_back(node)  # drained: resumed here
    return proc, out, node


def test_a_node_down_resumes_in_a_new_allocation_without_it(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    proc, out, node = _down_while_measuring(slurm_clean, tmp_path, "")
    assert proc.returncode == 1, out[-6000:]  # A died with its node
    assert f"{A}: layout dead" in out, out[-6000:]
    assert re.search(rf"node\(s\) {node} \((down|drain)[\w+]*\*?: ppsweep-test\) failed; "
                     r"on_limit = \"renew\": "
                     rf"releasing it, asking for a new one of 2 node\(s\) without {node}", out), (
        out[-6000:])
    new = re.search(r"cluster slurm: new allocation \d+ on (s70\d), (s70\d)", out)
    assert new is not None and node not in new.groups(), out[-6000:]
    assert f"cluster slurm: the run's claim moved to {', '.join(new.groups())}" in out, (
        out[-6000:])
    assert B in layouts_measured(the_run(tmp_path / "reports"))


def test_a_node_down_with_on_limit_stop_stops_with_the_resume_command(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    proc, out, node = _down_while_measuring(slurm_clean, tmp_path, 'on_limit = "stop"')
    assert proc.returncode == 2, out[-6000:]
    assert re.search(rf"{B}: cluster slurm: allocation \d+ (ended|runs).*node\(s\) {node} "
                     r"\((down|drain)[\w+]*\*?: ppsweep-test\) failed; on_limit = \"stop\": "
                     r"stopping", out), (
        out[-6000:])
    assert "--ppsweep-resume" in out, out[-6000:]
