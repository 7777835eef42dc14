"""The Slurm command lines the plugin generates (cluster/slurm.py): the allocation, the step of a
layout with and without Pyxis, the per-rank script, and the sweep-file keys of a slurm cluster.
The Pyxis line is checked here; the steps with it run on the test Slurm through a fake Pyxis
(tests/e2e/test_slurm_resources.py: Pyxis cannot be installed there)."""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.base import CommandResult
from pytest_ppsweep.cluster.labels import rank_labels
from pytest_ppsweep.cluster.rankspec import rank_specs
from pytest_ppsweep.cluster.slurm import (
    SCRIPT_ENV,
    Commands,
    _count_ids,
    _gres_gpus,
    allotted,
    cluster_of,
    commands,
    image_file,
    job_name,
    mem_mb,
    run_of,
    salloc_argv,
    srun_step_argv,
    step_resources,
    step_script,
    time_left_s,
)
from pytest_ppsweep.matrix.model import Host, MatrixError
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.slurmsettings import with_slurm

PATH = "/bin:/usr/bin"
SWEEP = """
[sweep]
name = "s"
model_path = "/models/m"
cluster = "gpu"

[[configs]]
pp = 2
tp = 8

[workload]
input_len = 16
output_len = 1
concurrency = [1]
num_requests = 2

[clusters.gpu]
kind = "slurm"
nodes = 2
gpus_per_node = 8
partition = "h200"
account = "perf"
time = "02:00:00"
salloc_options = ["--qos=perf"]
srun_options = ["--mpi=none"]
python = "/shared/venv/bin/python"
env = { HF_TOKEN = "hf_secret-value-123", NCCL_DEBUG = "WARN" }
"""


def sweep_of(tmp_path: Path, text: str = SWEEP):  # type: ignore[no-untyped-def]
    path = tmp_path / "ppsweep.toml"
    path.write_text(text)
    return load(path)


def test_the_allocation_is_one_salloc_with_the_cluster_settings(tmp_path: Path) -> None:
    """By default whole nodes (--exclusive), all their memory (--mem 0) and gpus_per_node GPUs;
    a node that failed in an earlier allocation is left out."""
    cluster = sweep_of(tmp_path).clusters["gpu"]
    assert salloc_argv(cluster, "ppsweep-r1", "ppsweep run r1") == [
        "salloc", "--no-shell", "--job-name", "ppsweep-r1", "--comment", "ppsweep run r1",
        "--nodes", "2", "--ntasks-per-node", "1", "--exclusive", "--mem", "0",
        "--gpus-per-node", "8", "--partition", "h200", "--account", "perf",
        "--time", "02:00:00", "--qos=perf",
    ]
    assert salloc_argv(cluster, "n", "c", exclude=["gpu-a07"])[-3:] == [
        "--exclude", "gpu-a07", "--qos=perf"]


def test_every_resource_key_overrides_its_default_for_the_allocation_and_each_step(
    tmp_path: Path,
) -> None:
    text = SWEEP.replace('account = "perf"', 'account = "perf"\nexclusive = false\n'
                         'cpus_per_task = 16\nmem = "512G"\ngres = "gpu:h200:8"')
    cluster = with_slurm(sweep_of(tmp_path, text).clusters["gpu"], jobid="9")
    argv = salloc_argv(cluster, "n", "c")
    assert "--exclusive" not in argv and "--gpus-per-node" not in argv
    assert argv[8:16] == ["--ntasks-per-node", "1", "--cpus-per-task", "16", "--mem", "512G",
                          "--gres", "gpu:h200:8"]
    assert step_resources(cluster) == ["--cpus-per-task", "16", "--mem", "512G",
                                       "--gres", "gpu:h200:8"]
    step = srun_step_argv(cluster, "n", ["a", "b"])
    assert step[step.index("--cpus-per-task"):][:6] == step_resources(cluster)
    # the defaults: every CPU the allocation holds on a node (learnt from it), all memory
    default = with_slurm(sweep_of(tmp_path).clusters["gpu"], node_cpus=112)
    assert step_resources(default) == ["--cpus-per-task", "112", "--mem", "0",
                                       "--gpus-per-node", "8"]
    no_gpus = with_slurm(default, request_gpus=False, node_cpus=0)
    assert step_resources(no_gpus) == ["--mem", "0"]


class _Answers(Commands):
    """Slurm's answers, by the command's first three words."""

    def __init__(self, answers: dict[str, str]) -> None:
        super().__init__()
        self.answers = answers

    def run(self, argv, timeout, what):  # type: ignore[no-untyped-def]
        key = " ".join(argv[:3])
        return CommandResult("slurm", tuple(argv), 0, self.answers.get(key, ""), "")


def test_what_an_allocation_holds_per_node_and_its_time_left() -> None:
    shown = """JobId=12 JobName=ppsweep-r1+gpu
   NumNodes=2 NumCPUs=224 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
     Nodes=gpu-a[01-02] CPU_IDs=0-111 Mem=2000000 GRES=gpu:h200:8(IDX:0-7)
   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0
"""
    held = allotted(_Answers({"scontrol show job": shown, "scontrol show hostnames":
                              "gpu-a01\ngpu-a02\n"}), "12")
    assert set(held) == {"gpu-a01", "gpu-a02"}
    assert (held["gpu-a01"].cpus, held["gpu-a01"].mem_mb, held["gpu-a01"].gpus) == (
        112, 2000000, 8)
    assert _count_ids("0-3,8,10-11") == 7 and _count_ids("") == 0
    assert _gres_gpus("gpu:8(IDX:0-7),nic:1") == 8 and _gres_gpus("") == 0
    assert mem_mb("512G") == 524288 and mem_mb("0") == 0 and mem_mb("1T") == 1048576
    for text, seconds in (("4:05", 245), ("1:00:00", 3600), ("2-03:00:10", 183610),
                          ("UNLIMITED", None), ("", None)):
        assert time_left_s(_Answers({"squeue --noheader --jobs": text}), "12") == seconds, text


def test_a_layout_is_one_step_and_with_pyxis_runs_in_the_image(tmp_path: Path) -> None:
    cluster = with_slurm(sweep_of(tmp_path).clusters["gpu"], jobid="4242")
    name = job_name("r1", "pp2-tp8-ep1", "abc")
    assert srun_step_argv(cluster, name, ["gpu-a01", "gpu-a02"]) == [
        "srun", "--overlap", "--jobid", "4242", "--job-name", "ppsweep-r1+pp2-tp8-ep1+abc",
        "--export", "ALL", "--quiet", "--nodes", "2", "--ntasks-per-node", "1", "--ntasks", "2",
        "--nodelist", "gpu-a01,gpu-a02", "--label", "--kill-on-bad-exit=0",
        "--mem", "0", "--gpus-per-node", "8", "--mpi=none", "sh", "-c", f'eval "${SCRIPT_ENV}"',
    ]
    pyxis = replace(with_slurm(cluster, container_image="nvcr.io#lmsysorg/sglang:v0.5.23"),
                    mounts=("/data/hf_models:/models:ro", "/scratch"))
    argv = srun_step_argv(pyxis, name, ["gpu-a01", "gpu-a02"])
    i = argv.index("--container-image")
    # the squashfs each node imported once; the engine's command, not the entrypoint; no home
    assert argv[i:i + 6] == [
        "--container-image", "/tmp/ppsweep-containers/nvcr.io_lmsysorg_sglang_v0.5.23.sqsh",
        "--no-container-entrypoint", "--no-container-mount-home",
        "--container-mounts", "/data/hf_models:/models:ro,/scratch"]
    assert argv[-3:] == ["sh", "-c", f'eval "${SCRIPT_ENV}"']
    # an image given as a squashfs is used as it is
    assert image_file(with_slurm(pyxis, container_image="/shared/sglang.sqsh")) == (
        "/shared/sglang.sqsh")


def test_each_task_runs_the_rank_of_its_slurm_nodeid_and_secrets_stay_off_argv(
    tmp_path: Path,
) -> None:
    sweep = sweep_of(tmp_path)
    cluster = replace(with_slurm(sweep.clusters["gpu"], jobid="7"),
                      hosts=(Host("10.0.0.1", "gpu-a01"), Host("10.0.0.2", "gpu-a02")))
    specs = rank_specs(sweep, cluster, sweep.configs[0])
    labels = [rank_labels("r1", "gpu", "pp2-tp8-ep1", s.node_rank) for s in specs]
    script = step_script(specs, labels)
    argv = srun_step_argv(cluster, job_name("r1", "pp2-tp8-ep1", "x"), ["gpu-a01", "gpu-a02"])
    assert "hf_secret-value-123" in script  # the ranks get it, in the step's environment...
    assert "hf_secret-value-123" not in shlex.join(argv)  # ...never on srun's command line
    # run the script as Slurm would on each node: the task of SLURM_NODEID=k starts node k's rank
    for node_id in ("0", "1"):
        echo = script.replace("env ", "echo env ", 2)
        out = subprocess.run(["sh", "-c", echo], env={"SLURM_NODEID": node_id, "PATH": PATH},
                             capture_output=True, text=True, check=True).stdout
        assert f"--node-rank {node_id}" in out and "--dist-init-addr 10.0.0.1:20000" in out
        assert "PPSWEEP_RUN=r1" in out and f"PPSWEEP_NODE_RANK={node_id}" in out
        assert "PPSWEEP-TASK-EXIT 0" in out
    bad = subprocess.run(["sh", "-c", script], env={"SLURM_NODEID": "5", "PATH": PATH},
                         capture_output=True, text=True, check=False)
    assert "PPSWEEP-TASK-EXIT 1" in bad.stdout and "SLURM_NODEID" in bad.stderr


def test_names_carry_the_run_id() -> None:
    assert job_name("kimi-20261201-101500") == "ppsweep-kimi-20261201-101500"
    assert run_of("ppsweep-kimi-20261201-101500+pp2-tp8-ep1+abc") == "kimi-20261201-101500"
    assert run_of("ppsweep-cmd") == "" and run_of("interactive") == ""
    # an allocation carries its cluster too: two slurm clusters of one run, two allocations
    assert cluster_of("ppsweep-kimi-20261201-101500+a") == "a"
    assert cluster_of("ppsweep-kimi-20261201-101500+pp2-tp8-ep1+abc") == ""


def test_a_login_node_runs_the_commands_over_ssh_with_the_ssh_keys(tmp_path: Path) -> None:
    text = SWEEP.replace('partition = "h200"', 'partition = "h200"\nlogin = "login1.example"\n'
                         'ssh_user = "perf"\nssh_key = "~/.ssh/id_slurm"')
    cluster = sweep_of(tmp_path, text).clusters["gpu"]
    where = commands(cluster)
    assert where.host is not None and where.where == "login node login1.example"
    assert where.host.settings.user == "perf" and where.host.settings.key_filename.endswith(
        "/.ssh/id_slurm")
    assert commands(cluster) is where  # one connection per login node and settings
    assert commands(sweep_of(tmp_path).clusters["gpu"]).host is None  # no login: this host


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("nodes = 2\n", ""), "key 'clusters.gpu.nodes'"),
        (("nodes = 2\n", 'hosts = ["a", "b"]\n'), "nodes come from its allocation"),
        (('time = "02:00:00"', 'time = "two hours"'), "a Slurm time limit"),
        (('kind = "slurm"', 'kind = "ssh"\nhosts = ["a", "b"]'), "only a slurm cluster takes it"),
        (('account = "perf"', 'jobid = "12a"'), "a Slurm job id"),
        (('account = "perf"', 'login = "-oProxyCommand=x"'), "a login node's host name"),
        (('account = "perf"', 'mem = "lots"'), "a Slurm memory size"),
        (('account = "perf"', 'gres = "gpu 8"'), "a Slurm gres list"),
        (('account = "perf"', 'cpus_per_task = -1'), "key 'clusters.gpu.cpus_per_task'"),
        (('account = "perf"', 'on_limit = "wait"'), "one of 'renew', 'stop'"),
        (('account = "perf"', 'time_margin_s = -5'), "key 'clusters.gpu.time_margin_s'"),
        (('account = "perf"', 'container_cache = "cache"'), "an absolute directory path"),
        (('account = "perf"', 'exclusive = "yes"'), "key 'clusters.gpu.exclusive'"),
    ],
)
def test_bad_slurm_keys_name_file_key_expected_and_found(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    with pytest.raises(MatrixError, match=r"ppsweep\.toml") as info:
        sweep_of(tmp_path, SWEEP.replace(*change))
    assert expected in str(info.value)


def test_slurm_nodes_are_placeholders_until_the_allocation(tmp_path: Path) -> None:
    cluster = sweep_of(tmp_path).clusters["gpu"]
    assert cluster.gpus == 16 and [h.name for h in cluster.hosts] == ["node0", "node1"]
