"""What a person sees at 80 and at 150 columns (a real terminal: tmux): the live status keeps
which layout, its phase and where the sweep stands (boot, point, ETA); pytest's rows of result
letters stay whole, each ending with its ``[NN%]``; the summary's tables fit the width (no line
wraps); the decode workload's table shows decode metrics. Then a resume of the finished run: its
points print as ``reused <run-id>``, their tests as ``R``, counted as reused, not skipped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.matrices import CONFIGS, emulated_cluster, sweep_head
from support.paths import sweep_folder
from support.processes import child_env
from support.terminal import Tmux, tmux_missing

# Two layouts × a prefill and a decode workload: 4 points on 2 boots (the workloads of one
# layout share its boot).
WORKLOADS = """
[workload]
vocab_size = 1000
num_requests = 6
repeats = 1

[workloads.prefill]
input_len = 4096
output_len = 1
concurrency = [2]

[workloads.decode]
input_len = 256
output_len = 64
concurrency = [2]
"""
ROW = re.compile(r"^sweep/test_sweep\.py [.RsxXFE]+")


def _pytest(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "pytest", *map(str, args), "-p", "no:cacheprovider"]


def _run(term: Tmux, argv: list[str], cwd: Path, width: int, timeout_s: float) -> tuple[str,
                                                                                      list[str]]:
    """Run ``argv`` in a ``width`` × 40 terminal: the final screen's history (wrapped lines
    joined, so a line wider than the terminal shows as one) and every live status line seen."""
    term.start(argv, cwd=cwd, env=child_env(), width=width)
    statuses: list[str] = []
    try:
        assert term.size() == f"{width}x40"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            screen = term.screen()
            statuses += [line.rstrip() for line in screen.splitlines()
                         if line.startswith("[ppsweep] ")]
            if "__EXIT__" in screen:
                break
            time.sleep(0.05)  # poll interval of the screen, not a synchronisation
        else:
            pytest.fail(f"pytest did not finish within {timeout_s:.0f} s:\n{term.screen()}")
        joined = subprocess.run(["tmux", "-L", term.socket, "capture-pane", "-p", "-J", "-S", "-",
                                 "-t", term.session], capture_output=True, text=True,
                                timeout=30, check=False).stdout
    finally:
        term.kill()
    return joined, statuses


@pytest.mark.parametrize("width", [80, 150])
def test_the_terminal_at_80_and_150_columns(tmp_path: Path, ports: list[int],
                                            width: int) -> None:
    if (why := tmux_missing()) is not None:
        if os.geteuid() != 0:
            pytest.skip(why)
        pytest.fail(why, pytrace=False)
    port = 35000 + (os.getpid() % 300) * 10 + (width == 150)
    ports.append(port)
    text = sweep_head("e2e", CONFIGS) + WORKLOADS + emulated_cluster(
        "local", "127.0.19" if width == 80 else "127.0.20", port, port + 5000, 300,
        tmp_path / "state")
    folder = sweep_folder(tmp_path / "sweep", text)
    reports = tmp_path / "reports"
    term = Tmux(f"w{width}")
    history, statuses = _run(term, _pytest(folder, "--ppsweep-reports", reports,
                                           "--ppsweep-run-id", "w"), tmp_path, width, 300)
    assert "__EXIT__ 0" in history, history[-4000:]
    # the live status: never wider than the terminal; which layout, its boot and point, and
    # (once a boot and a round were measured) the ETA
    assert statuses, history[-3000:]
    assert all(len(s) <= width for s in statuses), max(statuses, key=len)
    assert any(re.search(r"\| boot 1/2, point 1/4$", s) for s in statuses), statuses
    assert any(re.search(r"\| boot 2/2, point [34]/4, ETA \d+ (s|min)$", s) for s in statuses), \
        statuses
    lines = history.splitlines()
    # pytest's rows of result letters: each whole, ending with its [NN%] (never a bare
    # "sweep/test_sweep.py ." broken off by a line of ours), and every test in them
    rows = [line for line in lines if ROW.match(line)]
    assert rows and all(re.search(r"\[ *\d+%\]$", r) for r in rows), "\n".join(rows)
    assert rows[-1].endswith("[100%]"), rows
    passed = int(re.search(r"=+ (\d+) passed", history).group(1))  # type: ignore[union-attr]
    assert sum(len(ROW.match(r).group(0)) - len("sweep/test_sweep.py ")  # type: ignore[union-attr]
               for r in rows) == passed
    # the summary: no line wider than the terminal, the decode table in decode metrics
    start = next(i for i, line in enumerate(lines) if "ppsweep summary: w" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("run status: "))
    summary = lines[start + 1:end]
    # (a rerun command is the exception: whole on its own line, to be copied; the terminal
    # soft-wraps it, and copying it gives the command back in one piece)
    assert all(len(line) <= width for line in summary if not line.startswith("      Rerun: ")), \
        max(summary, key=len)
    rerun = [line for line in summary if line.startswith("      Rerun: ")]
    assert all(line.rstrip().endswith("/reports/w") for line in rerun), rerun
    decode = next(i for i, line in enumerate(summary) if "workload decode" in line)
    assert "Out TPS" in summary[decode + 1] or "Out TPS" in summary[decode + 2], summary
    assert "Input TPS" in "\n".join(summary[:decode])

    # the finished run resumed: nothing boots, every point reused from run w
    again, _ = _run(Tmux(f"r{width}"), _pytest(folder, "--ppsweep-reports", reports,
                                               "--ppsweep-resume", reports / "w"),
                    tmp_path, width, 300)
    assert "__EXIT__ 0" in again, again[-4000:]
    for cid in ("pp4-tp8-ep4-prefill", "pp4-tp8-ep4-decode", "pp8-tp4-ep4-prefill",
                "pp8-tp4-ep4-decode"):
        assert re.search(rf"^\[ppsweep \d\d:\d\d:\d\d\] {cid}: reused w: done in this run "
                         r"\(resumed\)$", again, re.M), again[-4000:]
    rows = [line for line in again.splitlines() if ROW.match(line)]
    assert rows and all(set(ROW.match(r).group(0).split()[-1]) <= {"R", "."}  # type: ignore[union-attr]
                        for r in rows), rows
    assert re.search(r"=+ .*\d+ reused", again) and " skipped" not in again, again[-2000:]
    assert "booting on" not in again
