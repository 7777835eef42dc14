"""What Slurm is asked for, on the real test Slurm (issue 38, point 4): whole nodes, all their
memory and their GPUs for the allocation and every step; the preflight's report of what each rank
gets on each node, and its refusal when a rank would get fewer than the sweep asks; Pyxis steps
that name a squashfs imported once per node; a misspelt server flag refused by the preflight
with the engine's own parser, in a step on node 0 (in the image with Pyxis), before any layout's
step.

The test Slurm (scripts/provision_slurm.sh) is select/cons_tres with 2 CPUs, RealMemory 4000 MB
and gres gpu:8 (no device files) per node, so --exclusive, --cpus-per-task, --mem,
--gpus-per-node and --gres are granted or refused by Slurm itself.

Pyxis is FAKED here: it and enroot cannot be built on this machine (no package in the archive, no
source to fetch). tests/support/fakepyxis/ holds an ``srun`` wrapper (no SPANK plugin) that takes
the --container-* options off the command line, records them, refuses a --container-image path
that is not an existing squashfs, and runs the step on the node itself (not in a container); and
an ``enroot`` whose ``import`` writes a small file and records which node imported what. So what
is tested is the plugin's side: the options each step carries, and that each node imports once
and later layouts reuse the file; a real container is not started. After each test there are 0
allocations, 0 steps and 0 tasks (slurm_clean)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.matrices import replace_once
from support.paths import REPO, sweep_folder
from support.processes import wait_until
from support.slurm import (
    TestSlurm,
    allocations_granted,
    node_processes,
    slurm,
    slurm_cluster_toml,
    two_layout_sweep,
)

from pytest_ppsweep.cluster.labels import CONFIG_ENV

A, B = "pp2-tp8-ep4", "pp4-tp4-ep4"
FAKE_PYXIS = REPO / "tests" / "support" / "fakepyxis"


def make_folder(tmp_path: Path, extra: str = "", *, request_gpus: bool = True,
                requests: int = 40, server: str = "") -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    state = tmp_path / "simstate"
    state.mkdir()
    text = two_layout_sweep("slurmres", model, "slurm", input_len=512, requests=requests,
                            repeats=1)
    if server:
        text = replace_once(text, "[server]\n", f"[server]\n{server}")
    return sweep_folder(tmp_path / "sweep", text + slurm_cluster_toml(
        "slurm", state, nodes=2, extra=extra, request_gpus=request_gpus))


def run(folder: Path, reports: Path, *args: str, env: dict[str, str] | None = None,
        timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
         "--ppsweep-reports", str(reports), *args],
        capture_output=True, text=True, timeout=timeout_s, cwd=folder,
        env={**os.environ, **(env or {})},
    )


def rank_environ(cluster: TestSlurm, config: str) -> dict[str, str]:
    """The environment of a running emulator rank of ``config`` (node 0's or any)."""
    for line in node_processes(cluster):
        pid = int(line.split()[1].rstrip(":"))
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if f"{CONFIG_ENV}={config}".encode() in env and b"pytest_ppsweep.sim" in cmd \
                and not cmd.startswith(b"env"):
            return dict(e.decode(errors="replace").split("=", 1) for e in env if b"=" in e)
    return {}


def test_whole_nodes_their_memory_and_gpus_are_asked_and_each_rank_is_reported(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    """Default keys: the allocation is --exclusive with --mem 0 and --gpus-per-node 8; every
    step asks the node's CPUs, all memory and 8 GPUs; the preflight reports what each rank gets,
    read from Slurm (scontrol show job -d, and a step with the layout's own resources)."""
    folder = make_folder(tmp_path, requests=400)
    reports = tmp_path / "reports"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider",
         "--ppsweep-reports", str(reports), "--ppsweep-config", A],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=folder,
        start_new_session=True)
    try:
        env: dict[str, str] = {}

        def rank_up() -> bool:
            env.update(rank_environ(slurm_clean, A))
            return bool(env)

        wait_until(rank_up, 120, f"a rank of {A}")
        job = slurm("scontrol", "show", "job", "-d", env["SLURM_JOB_ID"])
        step = slurm("scontrol", "show", "step", f"{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}")
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(30)
    assert proc.returncode == 0, out[-6000:]
    # the allocation: whole nodes, all their memory, 8 GPUs each
    assert "OverSubscribe=NO" in job, job
    assert "CPU_IDs=0-1 Mem=4000 GRES=gpu:8(IDX:0-7)" in job, job
    # the rank's step: the node's 2 CPUs, all of the job's memory, 8 GPUs per node
    assert "TRES=cpu=4,mem=8000M,node=2" in step, step
    assert "TresPerNode=gres:gpu:8" in step and "TresPerTask=cpu:2" in step, step
    # the preflight's report: each node, what a rank gets and what the allocation holds
    runs = [p for p in reports.iterdir() if p.is_dir()]
    report = (runs[0] / "progress.log").read_text().split("what each rank gets:", 1)[1]
    for node, address in slurm_clean.nodes[:2]:
        line = next(x for x in report.splitlines() if x.strip().startswith(f"{node} "))
        assert f"{node} ({address}): a rank gets 2 CPU(s)" in line, line
        assert "4000 MB, 8 GPU(s)" in line and "holds 2 CPU(s), 4000 MB, 8 GPU(s)" in line, line


def test_a_rank_that_would_get_fewer_cpus_memory_or_gpus_is_refused_naming_the_node(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    """An allocation the user holds (1 CPU and 1000 MB per node, no GPUs), a sweep that asks 2
    CPUs, 2000 MB and 8 GPUs per rank: refused before anything starts, each shortfall named with
    its node, what was asked and what was found."""
    folder = make_folder(tmp_path, 'cpus_per_task = 2\nmem = "2000M"')
    got = subprocess.run(["salloc", "--no-shell", "--nodes", "2", "--ntasks-per-node", "1",
                          "--cpus-per-task", "1", "--mem", "1000", "--job-name", "small"],
                         capture_output=True, text=True, check=True, timeout=60)
    held = got.stderr.split("Granted job allocation ")[1].split()[0]
    try:
        res = run(folder, tmp_path / "reports", "--ppsweep-slurm-jobid", held)
        steps = slurm("squeue", "--noheader", "--steps", "--jobs", held, "--format", "%j")
    finally:
        subprocess.run(["scancel", held], check=False, timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-4000:]
    assert "nothing was started" in out, out[-4000:]
    nodes = slurm("squeue", "--noheader", "--states", "all", "--jobs", held, "--format", "%N")
    for node in slurm("scontrol", "show", "hostnames", nodes.strip()).split():
        assert (f"{node} (" in out and f"): a rank asks 2 CPU(s) (cpus_per_task), found 1 in "
                f"allocation {held}") in out, out[-4000:]
        assert f"a rank asks 2000M = 2000 MB (mem), found 1000 MB in allocation {held}" in out
        assert f"a rank asks 8 GPU(s) (gpus_per_node), found 0 in allocation {held}" in out
    assert "+pp" not in steps  # no layout's step was started


def test_pyxis_steps_name_the_squashfs_each_node_imported_once(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    """FAKE Pyxis (module docstring): two layouts in a container image. Each node imports the
    image once (in the preflight), both layouts' steps name that squashfs with
    --no-container-entrypoint and --no-container-mount-home, and nothing is imported again."""
    cache = tmp_path / "containers"
    folder = make_folder(tmp_path, f'container_image = "registry.example#lab/sglang:t1"\n'
                         f'container_cache = "{cache}"\nmounts = ["/data:/data:ro"]')
    log = tmp_path / "pyxis.log"
    env = {"PATH": f"{FAKE_PYXIS}:{os.environ['PATH']}", "PPSWEEP_FAKE_PYXIS_LOG": str(log)}
    res = run(folder, tmp_path / "reports", env=env)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-6000:]
    squashfs = cache / "registry.example_lab_sglang_t1.sqsh"
    assert squashfs.is_file()
    imports = Path(f"{log}.imports").read_text().splitlines()
    # at most once per node (the nodes share this /tmp: one may find the other's file)
    # over the whole run: the second layout imported nothing again
    importers = [line.split()[0] for line in imports]
    assert imports and len(importers) == len(set(importers)), imports
    assert all(line.split()[1] == "docker://registry.example#lab/sglang:t1" for line in imports)
    steps = [line for line in log.read_text().splitlines() if "nodes=" in line]
    # a layout's step spans its nodes; the one-node steps are the engine's own commands run in
    # the image (the server-flag check on node 0, each node's versions: Backend.run_engine)
    layout_steps = [line for line in steps if "," in line.split("nodes=", 1)[1]]
    engine_steps = [line for line in steps if line not in layout_steps]
    assert len(layout_steps) == 2, steps  # one step per layout
    assert engine_steps and all(line.endswith(("nodes=s701", "nodes=s702"))
                                for line in engine_steps), steps
    for line in layout_steps + engine_steps:
        assert line.startswith(f"--container-image={squashfs} --no-container-entrypoint "
                               "--no-container-mount-home --container-mounts=/data:/data:ro"), line


PYXIS_IMAGE = 'container_image = "registry.example#lab/sglang:t1"'


def test_a_misspelt_flag_is_refused_in_a_step_on_node_0_and_in_the_pyxis_image(
    slurm_clean: TestSlurm, tmp_path: Path
) -> None:
    """A misspelt server flag on Slurm: the dry run finds it with the emulator's parser run
    here (it asks Slurm for nothing); the run's preflight runs the engine's own parser in
    a step on node 0 of its allocation and refuses the flag with the parser's suggestion before
    any layout's step. With Pyxis (FAKE, module docstring) that step runs in the image, after
    the nodes imported it."""
    typo = "chunked_prefil_size = 4096\n"
    suggestion = ("key 'server.chunked_prefil_size': expected a flag of pytest_ppsweep.sim (did "
                  "you mean 'chunked_prefill_size'?), found --chunked-prefil-size, which its "
                  "argument parser does not accept")
    for sub in ("plain", "pyxis"):
        (tmp_path / sub).mkdir()
    plain = make_folder(tmp_path / "plain", server=typo)
    dry = run(plain, tmp_path / "plain" / "reports", "--ppsweep-dry-run")
    # the emulator ships with the plugin: the dry run runs its parser here (asking Slurm for
    # nothing) and refuses the flag, as the preflight does in a step on node 0
    assert dry.returncode == pytest.ExitCode.USAGE_ERROR, (dry.stdout + dry.stderr)[-4000:]
    assert suggestion in dry.stderr, dry.stderr[-4000:]
    granted = allocations_granted()
    for folder, env in ((plain, {}), (make_folder(
            tmp_path / "pyxis", f'{PYXIS_IMAGE}\ncontainer_cache = "{tmp_path / "cache"}"',
            server=typo), {"PATH": f"{FAKE_PYXIS}:{os.environ['PATH']}",
                           "PPSWEEP_FAKE_PYXIS_LOG": str(tmp_path / "pyxis.log")})):
        res = run(folder, folder.parent / "reports", env=env)
        out = res.stdout + res.stderr
        assert res.returncode == pytest.ExitCode.USAGE_ERROR, out[-4000:]
        assert "nothing was started" in out, out[-4000:]
        node0 = re.search(r"(s70\d) \(10\.201\.0\.1\d\d\): " + re.escape(
            f"{folder / 'ppsweep.toml'}: {suggestion}"), out)
        assert node0 is not None, out[-4000:]
        assert not (folder.parent / "reports").exists() or not any(
            (folder.parent / "reports").iterdir())
    assert allocations_granted() - granted == 2  # the preflight ran in each run's allocation
    # Pyxis: the engine's parser ran in a one-node step in the imported image; no layout step
    steps = [line for line in (tmp_path / "pyxis.log").read_text().splitlines()
             if "nodes=" in line]
    assert steps and all("," not in line.split("nodes=", 1)[1] for line in steps), steps
    assert all(line.startswith(f"--container-image={tmp_path / 'cache'}/") for line in steps)
