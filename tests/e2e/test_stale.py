"""No stale server is ever measured (issue 16, point 0).

The scenario a user met: ``pytest <sweep> --ppsweep-config pp1`` in a terminal, the terminal
closed while PP1 boots. The run must stop every rank (SIGHUP is a Ctrl-C), and the same command
run again must boot its own ranks and measure them. Leftovers planted on purpose (a run whose
pytest was SIGKILLed) are refused by the preflight with their pid and the --ppsweep-reap hint,
and removed with --ppsweep-reap. Below the plugin: a boot whose ports something else answers
fails at once, naming the process, and a rank that exits fails the boot although its port
answers.
"""

from __future__ import annotations

import http.server
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.matrices import SMALL_HEAD, emulated_cluster
from support.paths import sweep_folder
from support.processes import (
    child_env,
    cmdline,
    proc_entries,
    sim_processes,
    wait_until,
)
from support.runs import rows, run_dir
from support.terminal import Tmux, tmux_missing

from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.service.launch import Service
from pytest_ppsweep.service.logscan import LogScanner
from pytest_ppsweep.service.readiness import BootFailed, wait_until_ready

PP1 = "pp1-tp32-ep4"
PP1_CONFIG = """
[[configs]]
pp = 1
tp = 32
"""
NET = "127.0.61"  # loopback addresses of these tests only


def _port(offset: int) -> int:
    return 36000 + (os.getpid() % 200) * 10 + offset


def _sweep(folder: Path, port: int, scale: float, state: Path) -> Path:
    text = SMALL_HEAD.format(configs=PP1_CONFIG) + emulated_cluster(
        "local", NET, port, port + 1, scale, state
    )
    return sweep_folder(folder, text)


def _command(folder: Path, reports: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", str(folder), "--ppsweep-config", "pp1",
            "--ppsweep-reports", str(reports), "-p", "no:cacheprovider", *extra]


def _pytest_pids(folder: Path) -> list[int]:
    """The pytest processes running the sweep in ``folder``."""
    found = []
    for entry in proc_entries():
        try:
            cmd = cmdline(entry)
        except OSError:
            continue
        if "-m pytest" in cmd and str(folder) in cmd:
            found.append(int(entry.name))
    return found


def _booting(reports: Path, port: int) -> bool:
    """Every rank of the run started and the boot under way (not yet healthy)."""
    logs = list(reports.glob(f"*/service/{PP1}/node0.log")) if reports.exists() else []
    return (len(sim_processes(f"--port {port}")) == 4 and bool(logs)
            and "Init torch distributed begin" in logs[0].read_text())


def _own_measurements(run: Path) -> None:
    """The run booted its own ranks and measured them: its rank 0 served every request."""
    configs = rows(run / "configs.csv")
    assert [(c["config_id"], c["boot_ok"]) for c in configs] == [(PP1, "True")], configs
    results = rows(run / "results.csv")
    assert results and all(r["completed"] == r["num_requests"] == "6" for r in results), results
    node0 = (run / "service" / PP1 / "node0.log").read_text()
    assert "address already in use" not in node0.lower()
    # the benchmark's requests are in this run's own rank 0 access log
    assert node0.count('"POST /generate') >= sum(int(r["completed"]) for r in results)


def test_closing_the_terminal_while_booting_stops_every_rank_and_the_rerun_is_clean(
    tmp_path: Path, ports: list[int]
) -> None:
    if (why := tmux_missing()) is not None:
        if os.geteuid() != 0:
            pytest.skip(why)
        pytest.fail(why, pytrace=False)
    port = _port(0)
    ports.append(port)
    # Time scale 100: PP1's boot lasts seconds of real time, long enough to close the terminal.
    folder = _sweep(tmp_path / "sweep", port, 100, tmp_path / "state")
    reports = tmp_path / "reports"
    command = _command(folder, reports)
    term = Tmux("stale")
    term.start(command, cwd=tmp_path, env=child_env())
    try:
        wait_until(lambda: _booting(reports, port), 120, "PP1 booting in the terminal")
        pytest_pids = _pytest_pids(folder)
        assert pytest_pids, "no pytest process of the sweep"
    finally:
        term.kill()  # the terminal is closed: SIGHUP to the pytest process
    wait_until(lambda: not sim_processes(f"--port {port}"), 30, "every rank stopped after SIGHUP")
    wait_until(lambda: not _pytest_pids(folder), 30, "the pytest process to end")
    first = run_dir(reports)
    log = (first / "progress.log").read_text()
    assert f"{PP1}: healthy after" not in log, "the terminal was closed after the boot"

    # The same command again: its own ranks boot, nothing stale answers, its numbers are its own.
    before = set(reports.iterdir())
    done = subprocess.run(command, cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                          timeout=300, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    (second,) = set(reports.iterdir()) - before
    _own_measurements(second)
    assert re.search(rf"{PP1}: healthy after [\d.]+ s real", out)


def test_leftovers_are_refused_with_their_owner_and_removed_with_reap(
    tmp_path: Path, ports: list[int]
) -> None:
    port = _port(2)
    ports.append(port)
    folder = _sweep(tmp_path / "sweep", port, 2000, tmp_path / "state")
    reports = tmp_path / "reports"
    command = _command(folder, reports)
    # Plant leftovers: a run whose pytest is SIGKILLed once healthy keeps its 4 ranks.
    planted = subprocess.Popen(command, cwd=tmp_path, env=child_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        def healthy() -> bool:
            logs = list(reports.glob("*/progress.log")) if reports.exists() else []
            return bool(logs) and f"{PP1}: healthy after" in logs[0].read_text()

        wait_until(healthy, 120, "the planted run to be healthy")
        planted.send_signal(signal.SIGKILL)
        planted.wait(30)
    finally:
        if planted.poll() is None:
            planted.kill()
            planted.wait()
    first = run_dir(reports)
    stale = set(sim_processes(f"--port {port}"))
    assert len(stale) == 4, stale

    refused = subprocess.run(command, cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                             timeout=120, check=False)
    out = refused.stdout + refused.stderr
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "nothing was started" in out
    busy = re.findall(r"HTTP port (\d+) is already in use by pid (\d+) \((.*?)\), a rank of run "
                      r"(\S+) \(.*--ppsweep-reap", out)
    assert len(busy) == 4, out[-3000:]
    assert {int(pid) for _p, pid, _c, _r in busy} == stale
    assert all(p == str(port) and "pytest_ppsweep.sim" in cmd and run == first.name
               for p, _pid, cmd, run in busy)
    assert f"rendezvous port {port + 1} is already in use by pid" in out
    assert set(sim_processes(f"--port {port}")) == stale  # refused: nothing touched

    # its own run id: run ids have a second's resolution, and the refused run may share its second
    reaped = subprocess.run([*command, "--ppsweep-reap", "--ppsweep-run-id", "reaped"],
                            cwd=tmp_path, env=child_env(),
                            capture_output=True, text=True, timeout=300, check=False)
    out = reaped.stdout + reaped.stderr
    assert reaped.returncode == 0, out[-4000:]
    assert "removed 4 leftover rank(s) of earlier runs" in out
    assert not stale & set(sim_processes(f"--port {port}"))
    _own_measurements(reports / "reaped")


# -- below the plugin: readiness ---------------------------------------------------------------


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[Callable[[str, int], None]]:
    """``serve(address, port)``: a plain HTTP server in this process answering 200 there."""
    servers: list[http.server.HTTPServer] = []

    def serve(address: str, port: int) -> None:
        server = http.server.HTTPServer((address, port), _Answer)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_port_answered_by_another_process_fails_the_boot_at_once(
    tmp_path: Path, ports: list[int], answering: Callable[[str, int], None]
) -> None:
    port = _port(4)
    ports.append(port)
    sweep = load(_sweep(tmp_path / "sweep", port, 2000, tmp_path / "state") / "ppsweep.toml")
    cluster = sweep.cluster("local")
    for host in cluster.hosts:  # a stale server on every rank's port (no preflight here)
        answering(host.address, port)
    service = Service(sweep, cluster, sweep.configs[0], tmp_path / "logs")
    t0 = time.monotonic()
    with pytest.raises(BootFailed) as failed:
        service.__enter__()
    assert time.monotonic() - t0 < 15  # at once, not after the 60 s boot timeout
    message = str(failed.value)
    assert "healthy" not in failed.value.reason
    assert re.search(
        rf"node\d's port answers, but not from the rank this boot launched: {NET}\.\d:{port} is "
        rf"held by another process: pid {os.getpid()} ", message), message
    assert "--ppsweep-reap" in message
    assert not sim_processes(f"--port {port}")  # every rank of the failed boot stopped


class _DiesDuringProbe:
    """A boot whose rank 0 exits while something else answers 200 on its port, and whose
    launcher cannot tell who holds the port (a remote node): the exit must win."""

    def __init__(self, url: str, log: Path) -> None:
        self.config = type("C", (), {"id": "pp1-tp1-ep1", "engine": "sglang"})()
        self.scanner = LogScanner(())
        self.progress = lambda _msg: None
        self._url = url
        self._log = log
        self.polls = 0

    @property
    def specs(self) -> list[object]:
        return [object()]

    @property
    def log_paths(self) -> list[Path]:
        return [self._log]

    def url(self, node_rank: int) -> str:
        self.polls += 1
        return self._url

    def exited(self) -> list[tuple[int, int]]:
        # alive when the poll starts, gone by the time the probe answered
        return [(0, 1)] if self.polls else []

    def impostor(self, node_rank: int, token: str | None) -> str | None:
        return None  # unknown: nothing proves it is not ours

    def findings(self) -> list[object]:
        return []

    def log_tail(self, lines: int = 25) -> str:
        return ""


def test_a_rank_that_exits_fails_the_boot_although_its_port_answers(
    tmp_path: Path, answering: Callable[[str, int], None]
) -> None:
    port = _port(6)
    answering(f"{NET}.9", port)
    log = tmp_path / "node0.log"
    log.write_text("")
    service = _DiesDuringProbe(f"http://{NET}.9:{port}", log)
    with pytest.raises(BootFailed, match="node0 exited with code 1"):
        wait_until_ready(service, timeout_s=30)  # type: ignore[arg-type]


def test_an_answer_with_another_boots_token_is_not_this_boot(tmp_path: Path) -> None:
    sweep = load(_sweep(tmp_path / "sweep", _port(8), 2000, tmp_path / "state") / "ppsweep.toml")
    service = Service(sweep, sweep.cluster("local"), sweep.configs[0], tmp_path / "logs")
    service.groups[0].boot_token = "this-boot"  # each group's boot has its own token
    assert service.impostor(0, "this-boot") is None
    assert service.impostor(1, None) is None  # no token (real SGLang), no launched rank to ask
    assert service.impostor(0, "earlier-boot") == (
        f"{NET}.1:{_port(8)} answers with boot token 'earlier-boot', not this boot's 'this-boot'"
    )


def test_sighup_and_sigterm_handlers_are_installed_for_the_run_and_put_back(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    folder = _sweep(pytester.path / "sweep", _port(9), 2000, tmp_path / "state")
    seen = tmp_path / "handlers.txt"
    (folder / "conftest.py").write_text(
        "import signal\n\n"
        "def pytest_collection_finish(session):\n"
        f"    with open({str(seen)!r}, 'w') as fh:\n"
        "        for sig in (signal.SIGHUP, signal.SIGTERM):\n"
        "            fh.write(getattr(signal.getsignal(sig), '__name__', '') + '\\n')\n"
    )

    def previous(_signum: int, _frame: object) -> None: ...

    before = signal.signal(signal.SIGHUP, previous)
    try:
        result = pytester.runpytest_inprocess(
            folder, "--collect-only", "--ppsweep-reports", tmp_path / "reports",
            "-p", "no:cacheprovider",
        )
        assert result.ret == 0, result.stdout.str()[-2000:]
        assert seen.read_text().split() == ["_on_sigterm", "_on_sigterm"]  # during the run
        assert signal.getsignal(signal.SIGHUP) is previous  # put back at close
    finally:
        signal.signal(signal.SIGHUP, before)
