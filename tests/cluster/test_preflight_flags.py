"""The server-flag check runs the engine's own parser where the engine runs (the backend's
``run_engine``), once per engine in a run, in the preflight and in the dry run; a cluster where
the dry run cannot run it says why (cluster/preflight.py: read_server_flags, dry_run_flags).

Real parsers here: the emulator's on this machine. The ssh + docker / ssh + process cases with
real SGLang on the test hosts are in tests/remote/test_real_docker_remote.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from support.matrices import replace_once, seed_text
from support.paths import sweep_folder

from pytest_ppsweep.cluster import preflight, serverflags
from pytest_ppsweep.cluster.base import CommandResult
from pytest_ppsweep.cluster.kind_local_docker import LocalDockerBackend
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.cluster.slurm import SlurmNodeHost
from pytest_ppsweep.matrix.model import Sweep
from pytest_ppsweep.matrix.parse import load


def _seeds(tmp_path: Path, text: str | None = None) -> Sweep:
    folder = sweep_folder(tmp_path / "m", text if text is not None else seed_text())
    return load(folder / "ppsweep.toml")


def test_the_dry_run_checks_a_local_servers_flags_with_its_own_parser(tmp_path: Path) -> None:
    sweep = _seeds(tmp_path)
    local = sweep.cluster("local")
    with Registry() as reg:
        problems, line = preflight.dry_run_flags(sweep, local, reg)
    assert problems == []
    assert line == ("cluster 'local': server flags, [axes] keys and choices checked against "
                    "pytest_ppsweep.sim's own argument parser on node 0 127.0.6.1 (127.0.6.1)")

    typo = _seeds(tmp_path / "t", replace_once(seed_text(), "chunked_prefill_size = 8192",
                                               "chunked_prefil_size = 8192"))
    with Registry() as reg:
        problems, _line = preflight.dry_run_flags(typo, typo.cluster("local"), reg)
    assert len(problems) == 1, problems
    assert problems[0].startswith("127.0.6.1 (127.0.6.1): "), problems
    assert ("key 'server.chunked_prefil_size': expected a flag of pytest_ppsweep.sim (did you "
            "mean 'chunked_prefill_size'?), found --chunked-prefil-size") in problems[0]


def test_slurm_says_the_dry_run_cannot_and_where_the_preflight_does(tmp_path: Path) -> None:
    """Slurm: a step needs the run's allocation, which the dry run never asks for; the line
    says so, and where the preflight runs the parser (in the image for Pyxis)."""
    sweep = _seeds(tmp_path)
    slurm = replace(sweep.cluster("local"), name="s", kind="slurm")
    with Registry() as reg:
        problems, line = preflight.dry_run_flags(sweep, slurm, reg)
        assert problems == []
        assert line == ("cluster 's': server flags not checked by the dry run: a step needs the "
                        "run's allocation, and the dry run asks Slurm for nothing; the preflight "
                        "checks them in a step on node 0 of the allocation")
        _problems, line = preflight.dry_run_flags(
            sweep, replace(slurm, container_image="/srv/sglang.sqsh"), reg)
    assert line.endswith("; the preflight checks them in the container image, in a step on "
                         "node 0 of the allocation (Pyxis)"), line


def test_pyxis_runs_the_parser_in_a_step_in_the_image() -> None:
    """The preflight's step on node 0 opens the container image as the ranks' steps do (an
    image given as a .sqsh path is used as it is; the engine's own command, not the image's
    entrypoint; the user's home kept out)."""
    sweep_cluster = replace(
        load(Path(__file__).parents[2] / "test_matrix" / "ppsweep.toml").cluster("local"),
        kind="slurm", container_image="/srv/sglang.sqsh", mounts=("/data:/data:ro",),
        slurm_jobid="42")
    node0 = sweep_cluster.rank0()
    argv = SlurmNodeHost(sweep_cluster, node0, in_image=True).argv(["python3", "-c", "x"])
    assert argv[:2] == ["srun", "--overlap"] and "--jobid" in argv and "42" in argv
    at = argv.index("--nodelist")
    assert argv[at + 1:] == [node0.name, "--container-image", "/srv/sglang.sqsh",
                             "--no-container-entrypoint", "--no-container-mount-home",
                             "--container-mounts", "/data:/data:ro", "python3", "-c", "x"]
    plain = SlurmNodeHost(sweep_cluster, node0).argv(["true"])
    assert "--container-image" not in plain


def test_an_unreachable_node_0_is_named_in_the_dry_runs_line(tmp_path: Path) -> None:
    """The seeds' ssh + docker cluster from a machine that cannot reach it: the line says the
    flags were not checked, why (node 0's connection), and where the preflight checks them."""
    sweep = _seeds(tmp_path)
    pro = sweep.cluster("pro6000")
    t0 = time.monotonic()
    with Registry() as reg:
        problems, line = preflight.dry_run_flags(sweep, pro, reg)
    assert problems == [] and time.monotonic() - t0 < 30
    assert line.startswith("cluster 'pro6000': server flags not checked by the dry run: host "
                           "601 (174.1.60.1): SSH connection as root"), line
    assert line.endswith("; the preflight checks them in the image on node 0 (a throwaway "
                         "container, over SSH)"), line


def test_the_parser_runs_once_per_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two docker clusters of one image: the image's parser runs once in the run; what it
    printed is checked against each, and a module it cannot import is a problem."""
    sweep = _seeds(tmp_path)
    local = replace(sweep.cluster("local"), launcher="docker")
    other = replace(local, name="local-b", hosts=sweep.cluster("local-b").hosts)
    dump = (serverflags.MARKER + '[{"flags": ["--chunked-prefill-size"], "choices": null, '
            '"takes_value": true}]\n')
    calls: list[tuple[str, Sequence[str], Mapping[str, str]]] = []

    def run_engine(self: LocalDockerBackend, sweep: Sweep, argv: Sequence[str],
                   env: Mapping[str, str], registry: Registry, timeout: float) -> CommandResult:
        calls.append((self.cluster.name, argv, env))
        return CommandResult("n0", tuple(argv), serverflags.DUMPED, dump, "")

    monkeypatch.setattr(LocalDockerBackend, "run_engine", run_engine)
    with Registry() as reg:
        first = preflight.check_flags(sweep, local, reg)
        second = preflight.check_flags(sweep, other, reg)
    assert [c[0] for c in calls] == ["local"]
    python, c, script, module = calls[0][1]
    assert (c, script, module) == ("-c", serverflags.ARGS_SCRIPT, "pytest_ppsweep.sim")
    assert calls[0][2]["PPSWEEP_SIM_PROFILE"] == "kimi-k3-6000d"  # rank 0's environment
    # the seeds set more flags than this parser knows: each named, the same for both clusters
    assert first == second and any("key 'server.disable_radix_cache'" in p for p in first)

    def not_importable(*args: object) -> CommandResult:
        return CommandResult("n0", (), serverflags.NOT_IMPORTABLE, "", "")

    monkeypatch.setattr(LocalDockerBackend, "run_engine", not_importable)
    with Registry() as reg:
        assert preflight.check_flags(sweep, local, reg) == [
            f"server module pytest_ppsweep.sim is not importable by {python} in image "
            f"{sweep.image} on this machine's dockerd"]
