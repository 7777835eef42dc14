"""Interrupts at seeded random moments on the emulator (issue 16, point 4).

``pytest <sweep>`` (the smallest emulator sweep: one node, one GPU, 4 rounds) is started in a
process group of its own and interrupted once, at a moment drawn from a seeded RNG over the
phases (boot, round, log scan, teardown, report) and triggered on what the run folder shows
(benchmarks/benchkit/interrupts.py): Ctrl-C to the group, SIGTERM to pytest, or SIGKILL of pytest
followed by ``--ppsweep-resume``. After each: no rank process or listener left, every finished
round present exactly once with its raw file complete, none that progress.log calls finished
lost; after a resume every round present exactly once and the exit code 0.

CI runs one moment per phase with Ctrl-C/SIGTERM and three SIGKILL + resume cases (~40 s);
``python benchmarks/bench_interrupts.py`` runs the issue's full counts (≥ 20, ≥ 10) and prints
the table of docs/RELIABILITY.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchkit.interrupts import Case, Moment, local_backend, moments, run_case

SEED = 16  # the suite's draw; the benchmark takes --seed
SIGNALLED = moments(SEED, 5)  # one pass over the five phases, Ctrl-C or SIGTERM each
KILLED = moments(SEED + 1, 3, signals=("SIGKILL",), phases=("boot", "round", "log scan"),
                 start=5)
CASES: list[Case] = []  # for tools/reliability_tables.py


def _id(m: Moment) -> str:
    return f"{m.index}-{m.phase.replace(' ', '_')}-{m.signal}"


@pytest.mark.parametrize("moment", SIGNALLED + KILLED, ids=_id)
def test_interrupt_leaves_nothing_and_keeps_every_finished_round(
    moment: Moment, tmp_path: Path
) -> None:
    case = run_case(local_backend(), moment, tmp_path)
    CASES.append(case)
    assert case.ok, (
        f"{moment.describe()} ({moment.signal}, seen at {case.seen!r}, rc {case.rc}):\n"
        f"leftovers: {case.leftovers}\nproblems: {case.problems}\nresumed: {case.resumed}\n"
        f"{case.output[-4000:]}"
    )
    if moment.signal == "SIGKILL":
        assert case.resumed == "ok"


def test_moments_are_seeded_and_cover_every_phase() -> None:
    assert moments(SEED, 5) == SIGNALLED  # the same draw every run
    assert {m.phase for m in SIGNALLED} == {"boot", "round", "log scan", "teardown", "report"}
    assert moments(SEED + 5, 5) != SIGNALLED
    twenty = moments(3, 20)
    assert all(sum(m.phase == p for m in twenty) == 4 for p in {m.phase for m in twenty})
