"""Live progress: what a person sees while a layout boots and a round runs.

In a real terminal (tmux, 150 × 40, no ``-s``) the boot status and a round's bar are on the
screen while they happen, rewritten in place, and gone before pytest writes a result; piped,
the same story is plain timestamped lines; under xdist the controller shows its workers' lines.
Also the parts alone: milestones read from real SGLang logs, the status texts, and which status
changes reach progress.log.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from support.matrices import CONFIGS, SMALL_HEAD, emulated_cluster, small_matrix
from support.paths import DATA, sweep_folder
from support.processes import child_env
from support.runs import run_dir
from support.terminal import Tmux, tmux_missing

from pytest_ppsweep.run.live import boot_status, round_bar
from pytest_ppsweep.service.readiness import BootStatus, milestone
from pytest_ppsweep.session.progress import WORKER_LINE, Progress, fit_status

STAMP = r"\[ppsweep \d\d:\d\d:\d\d\]"
PP8 = "pp8-tp4-ep4"

# -- the parts -----------------------------------------------------------------------------


def test_milestones_are_read_from_real_sglang_logs() -> None:
    text = (DATA / "sglang" / "n4-pp2tp2.node0.log").read_text()
    seen = [m for line in text.splitlines() if (m := milestone(line))]
    # the order SGLang 0.5.23 logs them on CPU (no cuda graph there)
    assert seen[:4] == ["Load weight begin", "Load weight end", "KV Cache is allocated",
                        "Memory pool end"]
    assert seen[-1] == "The server is fired up and ready to roll!"
    assert milestone("[2026-11-29 16:14:04 TP0] Capture cuda graph end. Time elapsed: 3 s") == (
        "Capture cuda graph end"
    )
    assert milestone("Decode batch. #running-req: 1") is None


def test_status_texts() -> None:
    text, state = boot_status(BootStatus(PP8, 12.4, 600, 3, 4, "node1: Load weight end"))
    assert text == f"{PP8} booting 12 s / 600 s | ranks ready 3/4 | node1: Load weight end"
    assert state == "booting | ranks ready 3/4 | node1: Load weight end"  # no clock in it
    assert round_bar(0, 40, 8) == "[........]"
    assert round_bar(20, 40, 8) == "[####....]"
    assert round_bar(40, 40, 8) == "[########]"


def test_a_narrow_status_line_keeps_the_position_and_eta() -> None:
    """At 80 columns the milestone and the bar's clock give way; which layout, its phase, and
    where the sweep stands (boot, point, ETA) stay."""
    boot = (f"{PP8} booting 212 s / 900 s | ranks ready 3/4 | node2: Capture cuda graph begin "
            "| boot 4/5, point 7/10, ETA 21 min")
    assert fit_status([boot], 150) == "[ppsweep] " + boot
    assert fit_status([boot], 100) == (f"[ppsweep] {PP8} booting 212 s / 900 s | ranks ready "
                                       "3/4 | boot 4/5, point 7/10, ETA 21 min")
    assert fit_status([boot], 79) == (f"[ppsweep] {PP8} booting 212 s / 900 s | boot 4/5, point "
                                      "7/10, ETA 21 min")
    bar = (f"{PP8} benchmark c8 r2/3 [############............] 20/40 | Input TPS 61,204 | "
           "14.2 s | boot 4/5, point 7/10, ETA 18 min")
    narrow = fit_status([bar], 79)
    assert len(narrow) <= 79 and narrow.endswith("| boot 4/5, point 7/10, ETA 18 min")
    assert fit_status([bar], 90) == (f"[ppsweep] {PP8} benchmark c8 r2/3 20/40 | boot 4/5, point "
                                     "7/10, ETA 18 min")
    two = fit_status([boot, bar], 79)
    assert len(two) <= 79 and two.endswith("| boot 4/5, point 7/10, ETA 18 min"), two
    assert two.count("ETA") == 1 and two.count(PP8) == 2, two


class _Plugins:
    def __init__(self, plugins: dict[str, Any]) -> None:
        self.plugins = plugins

    def get_plugin(self, name: str) -> Any:
        return self.plugins.get(name)

    def has_plugin(self, name: str) -> bool:
        return name in self.plugins


class _Config:
    """What Progress asks of pytest's config: its plugins and the verbosity."""

    def __init__(self, verbosity: int = 0, **plugins: Any) -> None:
        self.pluginmanager = _Plugins(plugins)
        self.verbosity = verbosity

    def get_verbosity(self) -> int:
        return self.verbosity


def test_a_warning_that_needs_action_shows_with_q(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """-q hides the progress lines, never a warning that asks the user to act (leftover ranks
    of an earlier run, a taken-over claim); progress.log keeps both."""
    log = tmp_path / "progress.log"
    progress = Progress(cast(pytest.Config, _Config(verbosity=-1)), log)
    progress(f"{PP8}: healthy after 3.1 s real")
    progress.warn("cluster local: 2 rank(s) of earlier runs are still on the nodes (remove "
                  "them with --ppsweep-reap)")
    # a step's own warning (run/ has only the progress callable): the same rule
    progress(f"WARNING: {PP8}: TTFT p99 ≤ 5 s needs 299 requests a probe; this workload sends 40")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and re.fullmatch(
        STAMP + r" WARNING: cluster local: 2 rank\(s\) of earlier runs .*--ppsweep-reap\)",
        err[0]), err
    assert "WARNING: pp8-tp4-ep4: TTFT p99" in err[1]
    assert len(log.read_text().splitlines()) == 3


def test_only_status_changes_reach_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    now = [0.0]
    log = tmp_path / "progress.log"
    progress = Progress(cast(pytest.Config, _Config()), log, heartbeat_s=30,
                        clock=lambda: now[0])
    for t in range(20):  # one poll every 0.2 s: the clock ticks, the state does not change
        now[0] = t * 0.2
        progress.status(PP8, f"{PP8} booting {t * 0.2:.0f} s / 60 s", state="booting | 0/4")
    progress.status(PP8, f"{PP8} booting 4 s / 60 s | ranks ready 4/4", state="booting | 4/4")
    now[0] = 40.0
    progress.status(PP8, f"{PP8} booting 40 s / 60 s | ranks ready 4/4", state="booting | 4/4")
    for done in range(1, 7):  # a bar: redrawn, never logged
        progress.status(PP8, f"{PP8} benchmark c2 r1/2 {round_bar(done, 6)}")
    progress.end(PP8)
    lines = log.read_text().splitlines()
    assert [re.sub(STAMP + " ", "", line) for line in lines] == [
        f"{PP8} booting 0 s / 60 s",
        f"{PP8} booting 4 s / 60 s | ranks ready 4/4",
        f"{PP8} booting 40 s / 60 s | ranks ready 4/4",  # the heartbeat of an unchanged state
    ]
    # -p no:terminal (no terminal reporter): the same lines on stderr, no \r
    err = capsys.readouterr().err
    assert err.splitlines() == lines and "\r" not in err


# -- the whole plugin ----------------------------------------------------------------------


def _port(offset: int) -> int:
    return 34000 + (os.getpid() % 300) * 10 + offset


def _pytest(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "pytest", *map(str, args), "-p", "no:cacheprovider"]


def test_a_real_terminal_shows_the_boot_and_the_rounds_live(tmp_path: Path,
                                                            ports: list[int]) -> None:
    if (why := tmux_missing()) is not None:
        if os.geteuid() != 0:
            pytest.skip(why)
        pytest.fail(why, pytrace=False)
    port = _port(0)
    ports.append(port)
    # Time scale 100: the boot (about 600 s emulated) takes seconds of real time, long enough
    # for a person (and this test) to read it; 40 requests make each round last a while too.
    matrix = small_matrix(CONFIGS, "127.0.16", port, port + 5000, 100, tmp_path / "state")
    folder = sweep_folder(tmp_path / "sweep", matrix)
    reports = tmp_path / "reports"
    term = Tmux("live")
    raw = tmp_path / "terminal.bytes"
    term.start(_pytest(folder, "--ppsweep-config", "pp8", "--ppsweep-reports", reports,
                       "--ppsweep-requests", "40", "--ppsweep-repeats", "1"),
               cwd=tmp_path, env=child_env(), log=raw)
    try:
        assert term.size() == "150x40"
        booting = bar = None
        final = ""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            screen = term.screen()
            log = next(reports.glob("*/progress.log"), None) if reports.exists() else None
            healthy = log is not None and f"{PP8}: healthy after" in log.read_text()
            if booting is None and "ranks ready" in screen and not healthy:
                booting = screen  # captured before the layout was healthy (log read after)
            if bar is None and re.search(r"benchmark c\d+ r1/1 \[#*\.*\] \d+/40", screen):
                bar = screen
            if "__EXIT__" in screen:
                final = screen
                break
            time.sleep(0.05)  # poll interval of the screen, not a synchronisation
        assert final, f"pytest did not finish within 240 s:\n{term.screen()}"
        assert booting is not None, f"no boot status on screen before healthy:\n{final}"
        status = next(line for line in booting.splitlines() if "ranks ready" in line)
        assert re.match(rf"\[ppsweep\] {PP8} booting \d+ s / 60 s \| ranks ready \d/4", status)
        assert "test_sweep.py ." not in booting  # no result yet: the first test is booting
        assert bar is not None, f"no round progress bar on screen:\n{final}"
        assert re.search(r"\d+/40 \| Input TPS (n/a|[\d,]+) \| [\d.]+ s", bar)
        history = term.history()
    finally:
        term.kill()
    assert "__EXIT__ 0" in final, history[-3000:]
    # The status line was rewritten in place (\r, clear to end of line), and it is gone:
    # pytest's own lines are whole, no status text is left on the screen.
    stream = raw.read_bytes().decode(errors="replace")
    assert stream.count(f"\r[ppsweep] {PP8} booting") > 1 and "\x1b[K" in stream
    assert not re.search(r"^\[ppsweep\] ", history, re.M), history
    assert re.search(r"^sweep/test_sweep\.py \.+", history, re.M), history
    assert re.search(rf"^{STAMP} {PP8}: healthy after [\d.]+ s real$", history, re.M), history
    assert re.search(r"^=+ 8 passed.* in [\d.]+s", history, re.M), history
    # progress.log keeps every status change (milestones included), not every redraw.
    log_text = (run_dir(reports) / "progress.log").read_text()
    changes = re.findall(rf"^{STAMP} {PP8} booting .*$", log_text, re.M)
    assert any("Load weight" in line for line in changes), log_text
    redraws = stream.count(f"\r[ppsweep] {PP8} booting")
    assert 0 < len(changes) < redraws, (changes, redraws)


def test_piped_output_gets_plain_timestamped_lines(tmp_path: Path, ports: list[int]) -> None:
    port = _port(1)
    ports.append(port)
    matrix = small_matrix(CONFIGS, "127.0.16", port, port + 5000, 500, tmp_path / "state")
    folder = sweep_folder(tmp_path / "sweep", matrix)
    done = subprocess.run(
        _pytest(folder, "--ppsweep-config", "pp8", "--ppsweep-reports", tmp_path / "reports"),
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "\r" not in out and "\x1b[K" not in out
    # not captured: the progress of the boot is in pytest's output, not only in progress.log
    assert re.search(rf"^{STAMP} {PP8}: booting on 4 nodes of local$", out, re.M), out
    assert re.search(rf"^{STAMP} {PP8} booting \d+ s / 60 s \| ranks ready \d/4", out, re.M), out
    assert re.search(rf"^{STAMP} {PP8}: healthy after", out, re.M), out
    assert re.search(rf"^{STAMP} {PP8} C=2: round 1/2 \d+/6 done", out, re.M), out
    # every status ends with where the sweep stands (one layout: its rounds are all done)
    assert re.search(rf"^{STAMP} {PP8} teardown \| stopping 4 ranks \| layout 1/1, ETA 0 s$",
                     out, re.M), out
    assert re.search(r"^=+ 8 passed", out, re.M), out


def test_the_xdist_controller_shows_its_workers_lines(tmp_path: Path, ports: list[int]) -> None:
    pytest.importorskip("xdist")
    port = _port(2)
    ports.extend([port, port + 1])
    text = SMALL_HEAD.format(configs=CONFIGS)
    for i, (name, net) in enumerate((("a", "127.0.17"), ("b", "127.0.18"))):
        text += emulated_cluster(name, net, port + i, port + 5000 + i, 500, tmp_path / "state")
    folder = sweep_folder(tmp_path / "sweep", text)
    done = subprocess.run(
        _pytest(folder, "--ppsweep-cluster", "a,b", "-n", "2",
                "--ppsweep-reports", tmp_path / "reports"),
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shown = [line for line in done.stdout.splitlines() if WORKER_LINE.match(line)]
    workers = {m[1] for line in shown if (m := WORKER_LINE.match(line))}
    assert workers == {"gw0", "gw1"}, done.stdout
    for cid in ("pp4-tp8-ep4", "pp8-tp4-ep4"):
        assert any(re.search(rf"gw\d\] {cid}: booting on 4 nodes of [ab]$", s) for s in shown)
        assert any(f"] {cid}: healthy after" in line for line in shown), shown
    # each line once, as in the shared progress.log (where the workers wrote them)
    log = (run_dir(tmp_path / "reports") / "progress.log").read_text().splitlines()
    assert sorted(shown) == sorted(line for line in log if WORKER_LINE.match(line))
    assert done.stderr.count("booting on") == 0  # not through the workers' stderr


def test_a_live_event_line_wraps_between_words_never_inside_one() -> None:
    """A live terminal once wrapped a long event line at its last column, mid-word (``T`` /
    ``TFT p50``): it is wrapped here between words, under the event's text."""
    from pytest_ppsweep.session.progress import event_lines

    line = ("[ppsweep 12:00:01] pp8-tp4-ep4 C=16 round 2/3: Input TPS 8,812 tok/s, TTFT p50 "
            "1.25 s, TPOT p50 21.4 ms, spread 0.8 % (limit 2.0 %), raw/pp8-tp4-ep4_c16_r2.json")
    for width in (40, 60, 80):
        shown = event_lines(line, width)
        assert all(len(part) <= width for part in shown), (width, shown)
        assert " ".join(p.strip() for p in shown) == line  # every word whole, in order
        under = min(len("[ppsweep 12:00:01] "), width // 3)  # under the text, on a wide one
        assert all(p.startswith(" " * under) for p in shown[1:]), shown
    assert event_lines("short", 80) == ["short"]
    assert event_lines(line, 200) == [line]
