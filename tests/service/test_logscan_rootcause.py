"""Which node a failure is named on (logscan.root_cause, blame, settle): a line that reports
another rank's failure is a consequence and ranks below that rank's own lines and its process
exit, whatever order the lines and exits were read in (issue 28, point 3)."""

from __future__ import annotations

from pathlib import Path

from pytest_ppsweep.service.logscan import (
    Blame,
    Finding,
    LogScanner,
    blame,
    root_cause,
    settle,
)
from pytest_ppsweep.sim.launch.faultlog import (
    SIGQUIT_LINE,
    custom_ar_capture_error,
    peer_lost_error,
)

GLOO_LOST = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
             "closed by peer [127.0.46.3]:29511")
KILLED = ("[2026-12-02 04:00:00] Subprocess scheduler_0 (pid=4242) crashed with exit code -9. "
          "Triggering SIGQUIT for cleanup...")


def _scan(logs: dict[int, list[str]]) -> list[Finding]:
    """Every node's findings, node 0's first (the order Service.findings reads them in)."""
    scanner = LogScanner()
    out: list[Finding] = []
    for node in sorted(logs):
        lines = "\n".join(logs[node]).splitlines()
        out += scanner.scan(lines, f"node{node}.log")
    return out


def _node(f: Finding) -> int:
    return int(f.source.removeprefix("node").removesuffix(".log"))


def test_the_emulators_custom_ar_fault_is_named_on_its_node_not_on_node0s_consequence() -> None:
    # chaos cell custom_ar_graph: node 1 fails its graph capture; node 0 logs the lost peer
    # ("Rank 1 scheduler is dead", Gloo's "Connection closed by peer") and is read first.
    findings = _scan({
        0: [peer_lost_error("node_rank 1 exited"),
            "Rank 1 scheduler is dead. Please check if there are relevant logs.",
            SIGQUIT_LINE, "Killed"],
        1: [custom_ar_capture_error(),
            "Received sigquit from a child process. It usually means the child failed."],
    })
    root = root_cause(findings)
    assert root is not None and root.source == "node1.log", root
    assert "Capture cuda graph failed" in root.line
    assert blame(findings, [(0, 1), (1, 1)], _node) == Blame(1, root, 1)


def test_a_traceback_that_ends_in_a_lost_peer_is_a_consequence_too() -> None:
    findings = _scan({0: ["Traceback (most recent call last):", '  File "x.py", line 1',
                          GLOO_LOST],
                      1: ["Traceback (most recent call last):", "KeyError: 'w'"]})
    root = root_cause(findings)
    assert root is not None and root.source == "node1.log" and root.kind == "exception"
    only = _scan({0: ["Traceback (most recent call last):", GLOO_LOST]})
    assert root_cause(only) is only[0]  # nothing else: still named, as the first line


def test_a_node_killed_without_a_word_outranks_the_others_lines_about_it() -> None:
    # Real SGLang, node 2's scheduler SIGKILLed mid-round: nodes 1 and 3 log the lost peer, and
    # every launcher ends -9 (its SIGQUIT cleanup kills its own tree).
    lost = ["Traceback (most recent call last):", GLOO_LOST, SIGQUIT_LINE]
    findings = _scan({1: lost, 3: lost})
    every = [(0, -9), (1, -9), (2, -9), (3, -9)]
    assert blame(findings, every, _node) == Blame(2, None, -9)
    # node 2's exit seen before the others', or alone: the same node
    assert blame(findings, [(2, -9)], _node) == Blame(2, None, -9)
    # its own line, once its launcher's watchdog wrote it, names it with that line
    with_own = _scan({1: lost, 2: [KILLED, SIGQUIT_LINE], 3: lost})
    who = blame(with_own, every, _node)
    assert who is not None and who.node == 2 and who.code == -9
    assert who.finding is not None and who.finding.kind == "killed"
    # before any exit is seen, the consequence line is all there is: its node, its line
    assert blame(findings, [], _node) == Blame(1, findings[0], None)


def test_an_own_fatal_line_outranks_every_exit() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    findings = _scan({0: [GLOO_LOST], 1: [oom]})
    assert blame(findings, [(0, -9), (3, -9)], _node) == Blame(1, findings[1], None)
    assert blame([], [(0, 1), (3, -9)], _node) == Blame(3, None, -9)
    assert blame([], [], _node) is None


class _Ranks:
    """What settle looks at: the fatal lines read and the exits, changed between looks."""

    def __init__(self, script: list[tuple[int, int]]) -> None:
        self.script = script  # (fatal lines, ranks exited) at each look; the last one stays
        self.looks = 0

    def look(self) -> tuple[object, bool]:
        size, ended = self.script[min(self.looks, len(self.script) - 1)]
        self.looks += 1
        return (size, ended), ended == 2


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_settle_ends_once_every_rank_exited_or_no_new_fatal_line_came_bounded() -> None:
    def run(script: list[tuple[int, int]]) -> tuple[float, int]:
        clock, ranks = _Clock(), _Ranks(script)
        waited = settle(ranks.look, limit_s=2.0, quiet_s=0.5, poll_s=0.125, clock=clock,
                        sleep=clock.sleep)
        return waited, ranks.looks

    # every rank exited, and one look found nothing new: done
    assert run([(10, 1), (20, 1), (30, 2)]) == (0.375, 4)
    # a rank that never exits: done 0.5 s after the last new fatal line
    assert run([(10, 1), (20, 1)]) == (0.625, 6)
    # fatal lines that keep coming: the bound
    assert run([(n, 0) for n in range(100)]) == (2.0, 17)


def test_real_sglang_node2_sigkilled_mid_round_is_named_over_its_peers_gloo_errors(
    data_dir: Path,
) -> None:
    # tests/data/sglang/pp4-node2-sigkilled.node*.log: real SGLang 0.5.23 on CPU, PP4, node 2's
    # scheduler SIGKILLed mid-round (tests/real/test_real_sglang.py): node 2 wrote nothing,
    # nodes 0, 1 and 3 logged Gloo's "Connection closed by peer" / "Connection reset by peer"
    # and their SIGQUIT cleanup, and every launcher ended -9.
    scanner = LogScanner()
    findings = [f for n in range(4) for f in scanner.scan_file(
        data_dir / "sglang" / f"pp4-node2-sigkilled.node{n}.log")]
    assert {f.kind for f in findings} == {"traceback", "consequence", "sigquit"}

    def node(f: Finding) -> int:
        return int(f.source.rsplit(".node", 1)[1].removesuffix(".log"))

    every = [(0, -9), (1, -9), (2, -9), (3, -9)]
    assert blame(findings, every, node) == Blame(2, None, -9)
