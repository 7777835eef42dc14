"""A layout that dies after health is named on the node where it died, even when another
node's line about it is read before that node's own line or exit (real SGLang: node 2's
scheduler SIGKILLed mid-round; its peers' Gloo errors land first). Issue 28, point 3."""

from __future__ import annotations

from pathlib import Path

from pytest_ppsweep.service.liveness import Liveness
from pytest_ppsweep.service.logscan import LogScanner
from pytest_ppsweep.sim.launch.faultlog import SIGQUIT_LINE

GLOO_LOST = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
             "closed by peer [127.0.62.3]:29511")
KILLED = ("Subprocess scheduler_0 (pid=4242) crashed with exit code -9. "
          "Triggering SIGQUIT for cleanup...")


class _FourNodes:
    """Nodes 1 and 3 log the lost peer at once, node 0 its SIGQUIT cleanup; node 2's exit
    (and, with ``own``, its watchdog's line) comes at the ``late``-th look at the exits, the
    others' exits with it."""

    def __init__(self, folder: Path, late: int, own: str = "") -> None:
        self.scanner = LogScanner()
        self.log_paths = [folder / f"node{r}.log" for r in range(4)]
        for p in self.log_paths:
            p.write_text("The server is fired up and ready to roll!\n")
        for r in (1, 3):  # node 2's neighbours in the pipeline
            with self.log_paths[r].open("a") as fh:
                fh.write(f"Traceback (most recent call last):\n{GLOO_LOST}\n{SIGQUIT_LINE}\n")
        with self.log_paths[0].open("a") as fh:  # its tokenizer manager's SIGQUIT handler
            fh.write(f"{SIGQUIT_LINE}\n")
        self.late, self.own, self.looks = late, own, 0

    def address(self, node_rank: int) -> str:
        return f"127.0.62.{node_rank + 1}"

    def url(self, node_rank: int) -> str:
        return f"http://{self.address(node_rank)}:1"

    def exited(self) -> list[tuple[int, int]]:
        self.looks += 1
        if self.looks < self.late:
            return []
        if self.looks == self.late and self.own:
            with self.log_paths[2].open("a") as fh:
                fh.write(self.own)
        return [(0, -9), (1, -9), (2, -9), (3, -9)]


def _watch(svc: _FourNodes) -> Liveness:
    return Liveness(svc, probe=lambda _u, _t: 200, wall=lambda: 0.0)  # type: ignore[arg-type]


def test_a_sigkilled_node_seen_after_a_peers_gloo_error_is_the_one_named(tmp_path: Path) -> None:
    death = _watch(_FourNodes(tmp_path, late=3)).check()
    assert death is not None and death.node_rank == 2, death
    assert death.what == ("rank exited with code -9 (SIGKILL) (also ended: node 0 code -9 "
                          "(SIGKILL), node 1 code -9 (SIGKILL), node 3 code -9 (SIGKILL))")


def test_its_own_watchdog_line_read_late_names_it_with_that_line(tmp_path: Path) -> None:
    death = _watch(_FourNodes(tmp_path, late=2, own=KILLED + "\n")).check()
    assert death is not None and death.node_rank == 2, death
    assert death.what.startswith("rank exited with code -9 (SIGKILL) (also ended: ")
    assert death.what.endswith(f"; fatal log line node2.log:2: [killed] {KILLED}")
