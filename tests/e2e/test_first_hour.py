"""A new user's first hour (issue 28): --collect-only and a selection that matches nothing read
the sweep file and nothing else: no connection is opened, no run folder written. A dry run
asks one thing of a node: node 0 runs the server's parser for the flag check (issue 38), and
when it cannot be reached the dry run says so.

Runs in-process (pytester) with every socket connect of the process recorded: an SSH or docker
connection to the sweep's unreachable cluster would show there (and take seconds to fail).
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (loaded before pytester snapshots sys.modules: numpy loads once)
import pytest
from support.matrices import replace_all, replace_once, seed_text
from support.paths import sweep_folder

SECRET = "hf_firsthoursecret42"


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address this process tries to connect a socket to while the test runs."""
    seen: list[Any] = []
    real = socket.socket.connect

    def record(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            seen.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", record)
    return seen


@pytest.fixture
def folder(pytester: pytest.Pytester) -> Path:
    """The seeds' sweep (its ssh cluster pro6000 is unreachable from here), with a secret."""
    text = replace_once(seed_text(), '[env]\n', f'[env]\nHF_TOKEN = "{SECRET}"\n')
    return sweep_folder(pytester.path / "matrix", text)


def _run(pytester: pytest.Pytester, folder: Path, reports: Path, *args: str
         ) -> pytest.RunResult:
    return pytester.runpytest_inprocess(folder, "--ppsweep-cluster", "pro6000",
                                        "--ppsweep-reports", str(reports),
                                        "-p", "no:cacheprovider", *args)


def test_dry_run_prints_every_launch_and_opens_no_connection(
    pytester: pytest.Pytester, folder: Path, tmp_path: Path, connects: list[Any]
) -> None:
    reports = tmp_path / "reports"
    result = _run(pytester, folder, reports, "--ppsweep-dry-run", "-k", "pp8 or pp4")
    out = result.stdout.str()
    assert result.ret == 0, out
    # no connection, as its help says: the flags are checked offline, and that is said first
    assert connects == [] and not reports.exists(), (connects, out[-2000:])
    lines = out.splitlines()
    title = next(i for i, ln in enumerate(lines) if ln.startswith("ppsweep dry run of "))
    assert lines[title + 1].startswith(
        "cluster 'pro6000': server flags, [axes] keys and choices checked offline (no "
        "connection) against sglang 0.5.23's flag list"), lines[title:title + 2]
    # the container options the seeds' §3.3 mapping is checked against
    assert ("--ipc host --shm-size 32g --gpus all --device /dev/infiniband:/dev/infiniband:rwm "
            "-v /data/hf_models/Kimi-K3:/data/hf_models/Kimi-K3:ro") in lines[title + 2]
    assert SECRET not in out + result.stderr.str()
    for cid in ("pp4-tp8-ep4", "pp8-tp4-ep4"):
        at = lines.index(f"{cid}: PP/TP/EP {cid[2]} / {cid.split('-')[1][2:]} / 4 at C = 8, 16")
        nodes = lines[at + 1:at + 5]
        assert [n.split()[0:2] for n in nodes] == [
            ["node0", "601"], ["node1", "602"], ["node2", "603"], ["node3", "604"]], nodes
        assert all(" -m sglang.launch_server --model-path /data/hf_models/Kimi-K3" in n
                   and "HF_TOKEN=" in n for n in nodes)
    assert "pp1-tp32-ep4: PP/TP/EP" not in out  # -k selects the points of the dry run
    assert "boots: 2 (one per point)" in lines
    # no earlier run: the seeds' figures for the model, with the boot bound beside them
    assert any(line.startswith("estimated cluster time: about 26 min to 58 min (the seeds' ")
               and line.endswith("; at most 60 min of boots (2 boot(s) × boot_timeout_s 1800 s)")
               for line in lines), [ln for ln in lines if ln.startswith("estimated")]


# Under xdist (a worker for the unreachable ssh cluster) the controller learns the selection
# only from its workers' collection: an empty one connects to nothing either. One worker runs
# the same controller path as several, at half the test time. (xdist leaves --collect-only to
# pytest alone: the serial case covers it.)
XDIST = ("-n", "1")


@pytest.mark.parametrize("args", [("--collect-only",), ("-k", "nomatch"),
                                  (*XDIST, "-k", "nomatch")],
                         ids=["collect-only", "no-match", "xdist-no-match"])
def test_nothing_to_run_connects_to_nothing_and_writes_nothing(
    pytester: pytest.Pytester, folder: Path, tmp_path: Path, connects: list[Any],
    args: tuple[str, ...]
) -> None:
    reports = tmp_path / "reports"
    result = _run(pytester, folder, reports, *args)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret in (0, pytest.ExitCode.NO_TESTS_COLLECTED), out
    assert connects == [], connects
    assert not reports.exists() or not any(reports.iterdir()), sorted(reports.rglob("*"))
    assert "Traceback" not in out and "no summary" not in out, out[-2000:]


def test_dry_run_checks_the_flags_against_a_local_servers_parser(
    pytester: pytest.Pytester, tmp_path: Path, connects: list[Any]
) -> None:
    """On a local cluster (here the emulator) the module's own parser is on this machine: the
    dry run checks the flags against it, as the preflight does on node 0, with "did you mean"."""
    text = replace_once(seed_text(), "chunked_prefill_size = 8192", "chunked_prefil_size = 8192")
    folder = sweep_folder(pytester.path / "typo", text)
    reports = tmp_path / "reports"
    result = _run(pytester, folder, reports, "--ppsweep-dry-run", "--ppsweep-cluster", "local")
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    assert "key 'server.chunked_prefil_size': expected a flag of pytest_ppsweep.sim (did you " \
        "mean 'chunked_prefill_size'?)" in err, err
    assert connects == [] and not reports.exists(), connects


def test_a_misspelt_flag_fails_the_dry_run_of_an_ssh_cluster_without_a_connection(
    pytester: pytest.Pytester, tmp_path: Path, connects: list[Any]
) -> None:
    """On the seeds' ssh + docker cluster (unreachable from here) a misspelt flag once passed
    the dry run with rc 0: it is now found offline, against SGLang's kept flag list, and named
    with the nearest real flag."""
    text = replace_once(seed_text(), "chunked_prefill_size = 8192", "chunked_prefil_size = 8192")
    folder = sweep_folder(pytester.path / "typo", text)
    reports = tmp_path / "reports"
    result = _run(pytester, folder, reports, "--ppsweep-dry-run")
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    assert "found by the offline check" in err, err
    assert "key 'server.chunked_prefil_size': expected a flag of sglang.launch_server 0.5.23 " \
        "(did you mean 'chunked_prefill_size'?)" in err, err
    assert connects == [] and not reports.exists(), connects


def test_a_node_0_that_cannot_be_reached_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """The run's claim on the cluster is taken on node 0 first: a node that refuses SSH stops
    the run with a usage error naming it (no INTERNALERROR, no paramiko traceback, no cleanup
    tried on nodes where nothing was started)."""
    text = replace_all(seed_text(), 'address = "174.1.60.', 'address = "127.0.60.')
    folder = sweep_folder(pytester.path / "refused", text)
    result = _run(pytester, folder, tmp_path / "reports", "-k", "pp8")
    out, err = result.stdout.str(), result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-2000:] + err
    assert "cannot take the run's claim on its cluster: host 601 (127.0.60.1): SSH " in err, err
    assert "nothing was launched" in err and "cleanup of cluster" not in err, err
    assert "INTERNALERROR" not in out + err and "Traceback" not in out + err, out[-2000:] + err
    # the error alone: no summary, and no run folder (nothing was recorded)
    assert "no summary" not in out and not any((tmp_path / "reports").iterdir()), out[-2000:]

    # A resumed run refused the same way keeps its folder as it was: nothing recorded is lost
    # (what its boots learnt stays in run.json), nothing is closed or summarised into it.
    kept = tmp_path / "reports" / "kept"
    (kept / "metadata").mkdir(parents=True)
    learnt = {"time_scale": 20.0, "engine_version": "0.5.4"}
    (kept / "metadata" / "run.json").write_text(json.dumps({"run_id": "kept", **learnt}))
    (kept / "results.csv").write_text("config_id,concurrency,repeat\n")
    (kept / "report.html").write_text("<html>the interrupted run's report</html>")
    before = {p: p.read_bytes() for p in kept.rglob("*") if p.is_file() and p.name != "run.json"}
    result = _run(pytester, folder, tmp_path / "reports", "-k", "pp8", "--ppsweep-resume", "kept")
    out, err = result.stdout.str(), result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-2000:] + err
    assert "cannot take the run's claim on its cluster" in err and "no summary" not in out, err
    assert {p: p.read_bytes() for p in before} == before
    recorded = json.loads((kept / "metadata" / "run.json").read_text())
    assert {k: recorded.get(k) for k in learnt} == learnt, recorded
    assert not (kept / "summary.csv").exists() and not (kept / "benchmark.json").exists()
    assert f"run folder {kept}: kept as it was (nothing ran)" in out, out[-2000:]


def test_a_dry_run_refuses_to_resume_a_missing_run(
    pytester: pytest.Pytester, folder: Path, tmp_path: Path, connects: list[Any]
) -> None:
    """Issue 39 point 7: the dry run plans the resume, so it checks the run exists as a real
    run does, instead of printing a plan that cannot run."""
    reports = tmp_path / "reports"
    result = _run(pytester, folder, reports, "--ppsweep-dry-run", "--ppsweep-resume", "nosuchrun")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines(["*--ppsweep-resume nosuchrun: expected a run folder with "
                                 "metadata/run.json, found none at *nosuchrun"])
    assert "boots:" not in result.stdout.str() and not reports.exists() and connects == []


def test_the_deselected_count_says_it_is_the_gates_tests(
    pytester: pytest.Pytester, folder: Path, tmp_path: Path
) -> None:
    """"10 deselected" on every sweep was never explained: the gate's tests, which run only
    with a reference run, are named below pytest's count."""
    result = _run(pytester, folder, tmp_path / "reports", "--collect-only")
    out = result.stdout.str()
    found = re.search(r"collected \d+ items / (\d+) deselected", out)
    assert found is not None, out[-3000:]
    count = int(found.group(1))
    assert (f"ppsweep: {count} deselected are the gate's tests (test_no_regression): they "
            "compare with a reference run and run only with --ppsweep-compare RUN") in out, out
