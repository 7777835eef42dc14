"""Interrupts at seeded random moments on Docker over SSH (issue 16, point 4).

The smallest sweep of benchmarks/benchkit/interrupts.py with its one rank in a container on h601
(the docker SDK over ssh://, the emulator image): Ctrl-C to pytest's process group and SIGTERM
at seeded moments, and one SIGKILL followed by ``--ppsweep-resume``. After each: no container
of the run on any host, no labelled process in any host's namespace, no new network
namespace; every finished round present exactly once; the resumed run completes the rest.
The conftest checks every host once more after each test.

CI runs three cases; ``python benchmarks/bench_interrupts.py --docker 5`` runs the issue's
count (≥ 5) and prints the table of docs/RELIABILITY.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchkit.interrupts import Case, Moment, docker_backend, moments, run_case
from support.remote import IMAGE, TestHosts

SEED = 16
# a round and a boot with Ctrl-C / SIGTERM, and a SIGKILL mid-round resumed
DOCKER = [m for m in moments(SEED, 5) if m.phase in ("round", "boot")] + [
    Moment(10, "round", "SIGKILL", "raw c1-r2.jsonl has 2/6 requests", 0.0, (1, 2), 2)
]
CASES: list[Case] = []  # for tools/reliability_tables.py


def _id(m: Moment) -> str:
    return f"{m.index}-{m.phase.replace(' ', '_')}-{m.signal}"


@pytest.mark.parametrize("moment", DOCKER, ids=_id)
def test_interrupt_on_docker_over_ssh_leaves_nothing_on_any_host(
    moment: Moment, test_hosts: TestHosts, tmp_path: Path
) -> None:
    case = run_case(docker_backend(test_hosts, IMAGE), moment, tmp_path)
    CASES.append(case)
    assert case.ok, (
        f"{moment.describe()} ({moment.signal}, seen at {case.seen!r}, rc {case.rc}):\n"
        f"leftovers: {case.leftovers}\nproblems: {case.problems}\nresumed: {case.resumed}\n"
        f"{case.output[-4000:]}"
    )
    if moment.signal == "SIGKILL":
        assert case.left_after_kill == 1, "the killed run left no container to resume past"
        assert case.resumed == "ok"
