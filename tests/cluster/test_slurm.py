"""The Slurm command lines the plugin generates (cluster/slurm.py): the allocation, the step of a
layout with and without Pyxis, the per-rank script, and the sweep-file keys of a slurm cluster.
The Pyxis line is checked here only: Pyxis cannot be installed on the test Slurm."""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.labels import rank_labels
from pytest_ppsweep.cluster.rankspec import rank_specs
from pytest_ppsweep.cluster.slurm import (
    SCRIPT_ENV,
    cluster_of,
    commands,
    job_name,
    run_of,
    salloc_argv,
    srun_step_argv,
    step_script,
)
from pytest_ppsweep.matrix.model import Host, MatrixError
from pytest_ppsweep.matrix.parse import load

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
salloc_options = ["--exclusive"]
srun_options = ["--mpi=none"]
python = "/shared/venv/bin/python"
env = { HF_TOKEN = "hf_secret-value-123", NCCL_DEBUG = "WARN" }
"""


def sweep_of(tmp_path: Path, text: str = SWEEP):  # type: ignore[no-untyped-def]
    path = tmp_path / "ppsweep.toml"
    path.write_text(text)
    return load(path)


def test_the_allocation_is_one_salloc_with_the_cluster_settings(tmp_path: Path) -> None:
    cluster = sweep_of(tmp_path).clusters["gpu"]
    assert salloc_argv(cluster, "ppsweep-r1", "ppsweep run r1") == [
        "salloc", "--no-shell", "--job-name", "ppsweep-r1", "--comment", "ppsweep run r1",
        "--nodes", "2", "--partition", "h200", "--account", "perf", "--time", "02:00:00",
        "--gpus-per-node", "8", "--exclusive",
    ]


def test_a_layout_is_one_step_and_with_pyxis_runs_in_the_image(tmp_path: Path) -> None:
    cluster = replace(sweep_of(tmp_path).clusters["gpu"], slurm_jobid="4242")
    name = job_name("r1", "pp2-tp8-ep1", "abc")
    assert srun_step_argv(cluster, name, ["gpu-a01", "gpu-a02"]) == [
        "srun", "--overlap", "--jobid", "4242", "--job-name", "ppsweep-r1+pp2-tp8-ep1+abc",
        "--export", "ALL", "--quiet", "--nodes", "2", "--ntasks-per-node", "1", "--ntasks", "2",
        "--nodelist", "gpu-a01,gpu-a02", "--label", "--kill-on-bad-exit=0",
        "--mpi=none", "sh", "-c", f'eval "${SCRIPT_ENV}"',
    ]
    pyxis = replace(cluster, container_image="nvcr.io#lmsysorg/sglang:v0.5.23",
                    mounts=("/data/hf_models:/models:ro", "/scratch"))
    argv = srun_step_argv(pyxis, name, ["gpu-a01", "gpu-a02"])
    i = argv.index("--container-image")
    assert argv[i:i + 4] == ["--container-image", "nvcr.io#lmsysorg/sglang:v0.5.23",
                             "--container-mounts", "/data/hf_models:/models:ro,/scratch"]
    assert argv[-3:] == ["sh", "-c", f'eval "${SCRIPT_ENV}"']


def test_each_task_runs_the_rank_of_its_slurm_nodeid_and_secrets_stay_off_argv(
    tmp_path: Path,
) -> None:
    sweep = sweep_of(tmp_path)
    cluster = replace(sweep.clusters["gpu"], slurm_jobid="7",
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
