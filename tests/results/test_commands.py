"""Every command a run prints (resume, rerun, a bisection's gate run) keeps the cluster and every
option that shaped the run, built by results/commands.py alone."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.runs import seed_run

from pytest_ppsweep.gate.bisect import GateRunner
from pytest_ppsweep.results import commands
from pytest_ppsweep.results.aggregate import load_run
from pytest_ppsweep.results.questions import rerun_command
from pytest_ppsweep.results.runstatus import resume_command

# a run's command line: its cluster, sweep file, workload and measuring options, reports folder
ARGS = ["test_matrix", "--ppsweep-cluster", "pro6000", "--ppsweep-matrix",
        "test_matrix/ppsweep.toml", "--ppsweep-repeats", "5", "--ppsweep-requests=40",
        "--ppsweep-reports", "out/reports", "--ppsweep-concurrency", "8", "-k", "pp8 or pp4",
        "--ppsweep-config", "pp8-tp4-ep4", "--ppsweep-run-id", "mine", "-p", "no:cacheprovider"]
KEPT = ["--ppsweep-cluster", "pro6000", "--ppsweep-matrix", "test_matrix/ppsweep.toml",
        "--ppsweep-reports", "out/reports", "-p", "no:cacheprovider"]


def _has(command: str, *options: str) -> bool:
    """Whether ``options`` stand next to each other in ``command``."""
    words = shlex.split(command)
    return any(words[i:i + len(options)] == list(options) for i in range(len(words)))


def test_the_resume_keeps_every_option_and_names_its_run() -> None:
    line = resume_command(ARGS, "mine")
    for i in range(0, len(KEPT), 2):
        assert _has(line, *KEPT[i:i + 2]), (KEPT[i], line)
    assert _has(line, "--ppsweep-repeats", "5") and "--ppsweep-requests=40" in line
    assert line.endswith("--ppsweep-resume mine") and "--ppsweep-run-id" not in line
    partial = resume_command(ARGS, "mine", every_layout=True)
    assert "-k" not in shlex.split(partial) and "--ppsweep-config" not in partial
    assert _has(partial, "--ppsweep-cluster", "pro6000")


def test_the_rerun_keeps_the_cluster_and_the_options_that_shaped_the_run(tmp_path: Path) -> None:
    """The printed Rerun: command once dropped --ppsweep-cluster (run as printed, it targeted
    the sweep's default cluster) and the run's own options (requests, reports folder...)."""
    run = seed_run(tmp_path / "r", cluster="pro6000", args=ARGS)
    given = _Given(load_run(run))
    line = rerun_command(given, ["pp8-tp4-ep4", "pp4-tp8-ep8"], 7, 2)  # type: ignore[arg-type]
    words = shlex.split(line)
    for i in range(0, len(KEPT), 2):
        assert _has(line, *KEPT[i:i + 2]), (KEPT[i], line)
    assert "--ppsweep-requests=40" in words and _has(line, "--ppsweep-concurrency", "8")
    # the points and how often they are measured are the rerun's own, once each
    assert words.count("--ppsweep-config") == 1 and "-k" not in words
    assert _has(line, "--ppsweep-config", "pp8-tp4-ep4,pp4-tp8-ep8")
    assert words.count("--ppsweep-repeats") == 1 and _has(line, "--ppsweep-repeats", "7")
    assert _has(line, "--ppsweep-boots", "2") and _has(line, "--ppsweep-reuse", str(run))
    assert "--ppsweep-run-id" not in words


def test_a_folder_without_its_command_line_reruns_on_its_recorded_cluster(tmp_path: Path) -> None:
    run = seed_run(tmp_path / "old", cluster="pro6000")
    line = rerun_command(_Given(load_run(run)), ["pp8-tp4-ep4"], 4)  # type: ignore[arg-type]
    assert line.startswith("pytest test_matrix --ppsweep-matrix test_matrix/x.toml "
                           "--ppsweep-cluster pro6000 --ppsweep-config pp8-tp4-ep4"), line


class _Given:
    """What rerun_command reads of an answer's input: the run's data."""

    def __init__(self, data: Any) -> None:
        self.data = data


def _good_run(reports: Path, cluster: str) -> Path:
    run = reports / "good"
    (run / "metadata").mkdir(parents=True)
    (run / "metadata" / "run.json").write_text(json.dumps({"run_id": "good",
                                                             "cluster": cluster}))
    return run


def test_a_bisect_gate_run_measures_where_the_good_run_was_from_a_relative_sweep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bisect --sweep test_matrix`` (relative): pytest runs in the sweep folder, so the
    folder and the reports it is given are absolute; each gate run is on the good run's
    cluster and its command is printed whole."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep").mkdir()
    good = _good_run(tmp_path / "reports", "pro6000")
    seen: list[tuple[list[str], Path]] = []

    def run(argv: list[str], cwd: Path, **_: Any) -> subprocess.CompletedProcess[str]:
        seen.append((argv, Path(cwd)))
        return subprocess.CompletedProcess(argv, 1, "", "boom")

    monkeypatch.setattr(subprocess, "run", run)
    log: list[str] = []
    runner = GateRunner(Path("sweep"), Path("reports"), "kimi3-pp", pytest_args=("-x",),
                        good_run=good, log=log.append)
    runner("img:2", [("pp8-tp4-ep4", 8)])
    argv, cwd = seen[0]
    assert cwd == tmp_path / "sweep"
    pytest_args = argv[argv.index("pytest") + 1:]
    assert pytest_args[0] == str(tmp_path / "sweep")
    assert pytest_args[pytest_args.index("--ppsweep-reports") + 1] == str(tmp_path / "reports")
    assert pytest_args[pytest_args.index("--ppsweep-cluster") + 1] == "pro6000"
    assert pytest_args[-1] == "-x"
    assert log[-1].endswith(shlex.join(["pytest", *pytest_args]))
    # the user's own --ppsweep-cluster wins
    runner = GateRunner(Path("sweep"), Path("reports"), "kimi3-pp",
                        pytest_args=("--ppsweep-cluster=local",), good_run=good, log=log.append)
    runner("img:3", [("pp8-tp4-ep4", 8)])
    assert "--ppsweep-cluster" not in seen[1][0]


def test_without_drops_each_form_of_an_option() -> None:
    assert commands.without(["a", "-k", "x", "-ky", "--ppsweep-config=p", "--ppsweep-config",
                             "q", "--kk"], ("-k", "--ppsweep-config")) == ["a", "--kk"]
