"""The server-flag check runs the engine's own parser where the engine runs (the backend's
``run_engine``), once per engine in a run, in the preflight and in the dry run; a cluster where
the dry run cannot run it says why (cluster/preflight.py: read_server_flags, dry_run_flags).

Real parsers here: the emulator's on this machine. The ssh + docker / ssh + process cases with
real SGLang on the test hosts are in tests/remote/test_real_docker_remote.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from support.matrices import replace_once, seed_text
from support.paths import sweep_folder
from support.real import Provisioned

from pytest_ppsweep.cluster import preflight, serverflags
from pytest_ppsweep.cluster.base import CommandResult
from pytest_ppsweep.cluster.kind_local_docker import LocalDockerBackend
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.cluster.slurm import SlurmNodeHost
from pytest_ppsweep.matrix.model import Sweep
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.slurmsettings import SlurmSettings, with_slurm


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


def test_slurm_checks_the_emulators_flags_here_and_says_where_the_preflight_does(
        tmp_path: Path) -> None:
    """Slurm: a step needs the run's allocation, which the dry run never asks for; the
    emulator ships with the plugin, so its parser runs here (no connection), and the line says
    where the preflight runs it again (in the image for Pyxis)."""
    sweep = _seeds(tmp_path)
    slurm = replace(sweep.cluster("local"), name="s", kind="slurm")
    with Registry() as reg:
        problems, line = preflight.dry_run_flags(sweep, slurm, reg)
        assert problems == []
        assert line == ("cluster 's': server flags, [axes] keys and choices checked against "
                        "pytest_ppsweep.sim's own argument parser on this machine (the emulator "
                        "the ranks run ships with this plugin: no connection); the preflight "
                        "checks them in a step on node 0 of the allocation")
        _problems, line = preflight.dry_run_flags(
            sweep, with_slurm(slurm, container_image="/srv/sglang.sqsh"), reg)
    assert line.endswith("; the preflight checks them in the container image, in a step on "
                         "node 0 of the allocation (Pyxis)"), line


def test_pyxis_runs_the_parser_in_a_step_in_the_image() -> None:
    """The preflight's step on node 0 opens the container image as the ranks' steps do (an
    image given as a .sqsh path is used as it is; the engine's own command, not the image's
    entrypoint; the user's home kept out)."""
    sweep_cluster = replace(
        load(Path(__file__).parents[2] / "test_matrix" / "ppsweep.toml").cluster("local"),
        kind="slurm", mounts=("/data:/data:ro",),
        settings=SlurmSettings(container_image="/srv/sglang.sqsh", jobid="42"))
    node0 = sweep_cluster.rank0()
    argv = SlurmNodeHost(sweep_cluster, node0, in_image=True).argv(["python3", "-c", "x"])
    assert argv[:2] == ["srun", "--overlap"] and "--jobid" in argv and "42" in argv
    at = argv.index("--nodelist")
    assert argv[at + 1:] == [node0.name, "--container-image", "/srv/sglang.sqsh",
                             "--no-container-entrypoint", "--no-container-mount-home",
                             "--container-mounts", "/data:/data:ro", "python3", "-c", "x"]
    plain = SlurmNodeHost(sweep_cluster, node0).argv(["true"])
    assert "--container-image" not in plain


def _no_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to reach a node fails the test."""
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the dry run opened a connection")

    monkeypatch.setattr(preflight, "read_server_flags", refuse)


def test_an_ssh_cluster_is_checked_offline_against_the_kept_flag_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeds' ssh + docker cluster: the dry run opens no connection (its help says so); it
    checks the flags against SGLang 0.5.23's list captured from its parser and kept in the
    project, names that check, and where the preflight checks them against the real one."""
    _no_connection(monkeypatch)
    sweep = _seeds(tmp_path)
    pro = sweep.cluster("pro6000")
    with Registry() as reg:
        problems, line = preflight.dry_run_flags(sweep, pro, reg)
    assert problems == [], problems  # every flag the seeds set is one of SGLang 0.5.23's
    assert line == (
        "cluster 'pro6000': server flags, [axes] keys and choices checked offline (no "
        "connection) against sglang 0.5.23's flag list (pytest_ppsweep/engine/flags/"
        "sglang-0.5.23.json, captured from its parser); the preflight checks them in the image "
        "on node 0 (a throwaway container, over SSH), against the version it runs"), line


def test_a_misspelt_flag_fails_the_offline_check_naming_the_key_and_the_real_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_connection(monkeypatch)
    typo = _seeds(tmp_path, replace_once(seed_text(), "chunked_prefill_size = 8192",
                                         "chunked_prefil_size = 8192"))
    pro = typo.cluster("pro6000")
    with Registry() as reg:
        problems, _line = preflight.dry_run_flags(typo, pro, reg)
    assert len(problems) == 1, problems
    said = preflight.message(pro, problems)
    assert said.startswith("the server flags of cluster 'pro6000' have 1 problem(s), found by "
                           "the offline check; nothing was started:"), said
    assert ("key 'server.chunked_prefil_size': expected a flag of sglang.launch_server 0.5.23 "
            "(did you mean 'chunked_prefill_size'?), found --chunked-prefil-size") in said


def test_the_kept_flag_list_is_the_newest_of_its_engine_and_module(tmp_path: Path) -> None:
    for version, flag in (("0.4.9", "--old"), ("0.10.1", "--new")):
        serverflags.captured_path("eng", version, tmp_path).write_text(json.dumps({
            "engine": "eng", "version": version, "module": "eng.serve",
            "actions": [{"flags": [flag], "choices": None, "takes_value": True}]}))
    kept = serverflags.captured("eng", "eng.serve", tmp_path)
    assert kept is not None and kept.version == "0.10.1" and kept.flags.options == {"--new"}
    assert serverflags.captured("eng", "other.module", tmp_path) is None


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




def test_the_kept_sglang_list_is_what_its_parser_prints(tmp_path: Path,
                                                        sglang_cpu: Provisioned) -> None:
    """tools/capture_engine_flags.py refreshes the kept list from the real parser (the docs'
    command); run on the provisioned SGLang 0.5.23 (waited for: the suite provisions it in the
    background) it writes the file the project keeps, byte for byte."""
    import subprocess
    import sys

    root = Path(__file__).parents[2]
    done = subprocess.run([sys.executable, str(root / "tools" / "capture_engine_flags.py"),
                           "--engine", "sglang", "--python", sglang_cpu.python, "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    name = "sglang-0.5.23.json"
    assert (tmp_path / name).read_bytes() == (serverflags.CAPTURED_DIR / name).read_bytes()
