"""Faults on the real test Slurm (issue 27, point 4), each run observed from outside and hit at an
observed moment (bounded waits, no sleeps): a step cancelled mid-round, a task killed and a node
set DOWN (one run in an allocation the user holds, one layout each), Ctrl-C during boot, and a
SIGKILL of pytest then ``--ppsweep-resume``. After each: 0 allocations, 0 steps, 0 tasks
(slurm_clean)."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import sweep_folder
from support.processes import wait_until
from support.slurm import (
    TestSlurm,
    node_back,
    node_processes,
    slurm,
    slurm_cluster_toml,
    two_layout_sweep,
)

from pytest_ppsweep.cluster.labels import CONFIG_ENV, NODE_RANK_ENV

A, B, C = "pp2-tp8-ep4", "pp4-tp4-ep4", "pp8-tp2-ep2"
C_CONFIG = """[[configs]]
pp = 8
tp = 2

"""


def make_folder(tmp_path: Path, configs: str = "", extra: str = "") -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    state = tmp_path / "simstate"
    state.mkdir()
    text = two_layout_sweep("slurmfault", model, "slurm", input_len=4096, requests=300,
                            repeats=2).replace("[workload]", configs + "[workload]")
    return sweep_folder(tmp_path / "sweep", text + slurm_cluster_toml(
        "slurm", state, nodes=2, scale=1000, extra=extra))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path)


def start(folder: Path, reports: Path, *args: str) -> subprocess.Popen[str]:
    """pytest on the sweep in a process group of its own (a terminal's foreground job)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
         "--ppsweep-reports", str(reports), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        cwd=folder,
    )


def finish(proc: subprocess.Popen[str], timeout_s: float = 180) -> str:
    out, _ = proc.communicate(timeout=timeout_s)
    return out


def run_of(reports: Path) -> Path:
    wait_until(lambda: reports.is_dir() and any(p.is_dir() for p in reports.iterdir()), 60,
               "the run folder")
    return next(p for p in reports.iterdir() if p.is_dir())


def requests_seen(run: Path, config: str) -> int:
    raw = run / "raw" / config
    if not raw.is_dir():
        return 0
    return sum(len(p.read_text().splitlines()) for p in raw.glob("*.jsonl"))


def step_of(config: str) -> str:
    for line in slurm("squeue", "--noheader", "--steps", "--format", "%i|%j").splitlines():
        sid, name = line.strip().split("|", 1)
        if f"+{config}+" in name:
            return sid
    return ""


def rows(run: Path) -> list[dict[str, str]]:
    path = run / "results.csv"
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def rank_pid(cluster: TestSlurm, config: str, node_rank: int) -> int:
    """The emulator rank process of ``config``'s node ``node_rank`` (root PID namespace)."""
    for line in node_processes(cluster):
        pid = int(line.split()[1].rstrip(":"))
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if (f"{CONFIG_ENV}={config}".encode() in env
                and f"{NODE_RANK_ENV}={node_rank}".encode() in env
                and b"pytest_ppsweep.sim" in cmd and not cmd.startswith(b"env")):
            return pid
    return 0


def test_step_cancelled_task_killed_node_down_in_a_held_allocation(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    """One run of three layouts in an allocation the user holds (--ppsweep-slurm-jobid): A's
    step is cancelled mid-round, one task of B is killed mid-round, a node is set DOWN while C
    measures (Slurm then ends the whole allocation)."""
    folder = make_folder(tmp_path, C_CONFIG)
    got = subprocess.run(["salloc", "--no-shell", "--nodes", "2", "--job-name", "mine"],
                         capture_output=True, text=True, check=True, timeout=60)
    held = got.stderr.split("Granted job allocation ")[1].split()[0]
    node = slurm_clean.nodes[1][0]
    reports = tmp_path / "reports"
    proc = start(folder, reports, "--ppsweep-slurm-jobid", held)
    try:
        run = run_of(reports)
        # A: its step is cancelled through Slurm while a round is sending requests
        wait_until(lambda: requests_seen(run, A) >= 3, 120, f"{A}'s first requests")
        step = step_of(A)
        assert step.startswith(f"{held}."), f"A's step {step!r} is not a step of job {held}"
        slurm("scancel", step)
        # B: one task (node 1's rank) is killed while a round is sending requests
        wait_until(lambda: requests_seen(run, B) >= 3, 120, f"{B}'s first requests")
        pid = rank_pid(slurm_clean, B, 1)
        assert pid, "no rank process of layout B node 1"
        os.kill(pid, signal.SIGKILL)
        # C: a node of the allocation goes DOWN while a round is sending requests
        wait_until(lambda: requests_seen(run, C) >= 3, 120, f"{C}'s first requests")
        slurm("scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=ppsweep-test")
        out = finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        subprocess.run(["scancel", held], check=False, timeout=60)  # it may still hold the node
        node_back(node)  # an admin DOWN may already be undone (ReturnToService=2)
    assert proc.returncode == 1, out[-6000:]
    # each death is named: the step Slurm ended, the task that exited, the node that went down
    for config in (A, B, C):
        assert f"{config}: layout dead" in out, out[-6000:]
    # finished rounds are kept; a round cut by the death is not recorded as a result, and one
    # that ended before the death was seen (its requests refused) is recorded with every failure
    # (the N/N rule then makes it INVALID): never a partial round that looks whole
    for row in rows(run):
        assert row["completed"] == row["num_requests"] or (
            int(row["completed"]) + int(row["failed"]) == int(row["num_requests"])
            and int(row["failed"]) > 0), row


def test_ctrl_c_during_boot_releases_the_allocation(
    slurm_clean: TestSlurm, folder: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    proc = start(folder, reports)
    try:
        wait_until(lambda: bool(step_of(A)), 120, f"{A}'s step (booting)")
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
        out = finish(proc, 120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, out[-6000:]  # interrupted
    # slurm_clean: the allocation, the step and every task are gone


def test_sigkill_of_pytest_then_resume(
    slurm_clean: TestSlurm, folder: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    proc = start(folder, reports)
    try:
        run = run_of(reports)
        wait_until(lambda: any(r["config_id"] == A for r in rows(run)), 120, f"a round of {A}")
        os.killpg(proc.pid, signal.SIGKILL)  # nothing of pytest tears anything down
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # the killed run left its allocation (named after it) on the cluster
    jobs = slurm("squeue", "--noheader", "--format", "%j").split()
    assert f"ppsweep-{run.name}+slurm" in jobs, jobs
    done_before = {(r["config_id"], r["repeat"]) for r in rows(run)}
    resumed = start(folder, reports, "--ppsweep-resume", str(run))
    out = finish(resumed, 240)
    assert resumed.returncode == 0, out[-6000:]
    after = [(r["config_id"], r["repeat"]) for r in rows(run)]
    assert len(after) == len(set(after)) == 4, after  # every round once: 2 layouts x 2 repeats
    assert done_before <= set(after)


def test_sigterm_while_salloc_waits_withdraws_the_request(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    """Every node is held by another job, so the run's salloc (on the login node over SSH)
    stays pending; a SIGTERM to pytest alone (not its group: salloc is not told) must withdraw
    the request before pytest exits, not leave it to be granted later or to the next reaper."""
    folder = make_folder(tmp_path, extra=slurm_clean.login_toml())
    got = subprocess.run(["salloc", "--no-shell", "--nodes", str(len(slurm_clean.nodes)),
                          "--job-name", "holds-every-node"],
                         capture_output=True, text=True, check=True, timeout=60)
    held = got.stderr.split("Granted job allocation ")[1].split()[0]
    proc = start(folder, tmp_path / "reports")
    try:
        wait_until(lambda: any(line.startswith("ppsweep-") and line.endswith(" PENDING")
                               for line in slurm("squeue", "--noheader", "--format",
                                                 "%j %T").splitlines()),
                   60, "the run's allocation request, pending")
        os.kill(proc.pid, signal.SIGTERM)
        out = finish(proc, 90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        ours = slurm("squeue", "--noheader", "--format", "%j %T")
        subprocess.run(["scancel", held], check=False, timeout=60)
    assert proc.returncode != 0, out[-4000:]
    # nothing of the run is queued: the request was withdrawn before pytest exited
    assert "ppsweep-" not in ours, ours
    # nothing ran: no summary of missing files, no run folder left for `runs` to list
    assert "no summary" not in out, out[-4000:]
    reports = tmp_path / "reports"
    assert not reports.is_dir() or not any(reports.iterdir()), list(reports.iterdir())
