"""The chaos matrix in CI, local backends: every emulator fault, SIGKILL / SIGSTOP of a rank, a
rank dying mid-round, the run folder's disk full and a port already taken, on the local
emulator; a taken port on real SGLang CPU (benchmarks/benchkit/chaos.py does the work;
benchmarks/bench_chaos.py runs the whole matrix).

Each cell: the expected verdict, the fault's evidence in the failure, nothing of the run left on
this machine after teardown. Loopback 127.0.46.1-2 (emulator) and 127.0.46.21-22 (SGLang),
ports 44000-44299. The faults that do not end a layout share one boot with a layout-ending one,
so the emulator needs ten boots (about 0.5 s each, but the SIGSTOP waits for the sweep's 10 s
health stall).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchkit.chaos import EXPECTED, Emulator, RealSglang, Result, check_cell, run_boot

# The emulator's boots in CI: the five boot faults alone, the launch-time crash alone, the
# port check (no boot), and one boot that takes the launch-time faults that do not end it,
# a full disk, then a SIGSTOP (its health stall ends the layout); SIGKILL mid-round last.
EMULATOR_CI = (
    ("nccl_init",), ("oom_load",), ("custom_ar_graph",), ("watchdog_hang",), ("never_join",),
    ("crash_mid_bench",), ("fail_requests",), ("port_taken",),
    ("slow_start", "wrong_topology", "disk_full", "sigstop"),
    ("die_mid_round",), ("sigkill",),
)  # fmt: skip
# Real SGLang: the port check only (no boot). A rank killed mid-round on real SGLang is
# tests/real/test_real_sglang.py's (liveness); the full disk and the other process faults on
# real SGLang are in benchmarks/bench_chaos.py: a boot costs 20-45 s of the CI budget.
SGLANG_CI = (("port_taken",),)


def _run(backend: Emulator | RealSglang, groups: tuple[tuple[str, ...], ...]) -> dict[str, Result]:
    out: dict[str, Result] = {}
    for group in groups:
        for r in run_boot(backend, group, say=print):
            out[r.fault] = r
    return out


@pytest.fixture(scope="module")
def emulator_cells(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    return _run(Emulator(tmp_path_factory.mktemp("chaos-emu")), EMULATOR_CI)


@pytest.fixture(scope="module")
def sglang_cells(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    from support.real import ProvisionImpossible, provision

    try:
        prov = provision()
    except ProvisionImpossible as exc:
        pytest.skip(f"cannot provision real SGLang here: {exc}")
    return _run(RealSglang(tmp_path_factory.mktemp("chaos-sglang"), prov), SGLANG_CI)



@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted({f for g in EMULATOR_CI for f in g}))
def test_chaos_emulator(emulator_cells: dict[str, Result], fault: str) -> None:
    check_cell(emulator_cells[fault])


@pytest.mark.slow
@pytest.mark.machine  # real SGLang, provisioned by its own call
@pytest.mark.parametrize("fault", sorted({f for g in SGLANG_CI for f in g}))
def test_chaos_real_sglang(sglang_cells: dict[str, Result], fault: str) -> None:
    check_cell(sglang_cells[fault])


def test_every_fault_has_an_expected_verdict_and_the_ci_subset_covers_every_fault() -> None:
    from benchkit.chaos import FAULTS, not_applicable

    ci = {f for g in EMULATOR_CI + SGLANG_CI for f in g}
    remote_ci = {"ssh_drop", "dockerd_restart"}  # tests/remote/test_chaos_remote.py
    assert set(EXPECTED) == set(FAULTS)
    assert set(FAULTS) <= ci | remote_ci
    assert not_applicable("nccl_init", "sglang") and not_applicable("ssh_drop", "emulator")


def test_a_rank_that_never_joined_is_named_by_the_rendezvous_timeout(tmp_path: Path) -> None:
    # Found by the matrix (never_join): the boot failed naming node 1's "Received sigquit",
    # a consequence, because torch's rendezvous timeout matched no fatal pattern.
    from pytest_ppsweep.service.logscan import LogScanner, root_cause

    log = tmp_path / "node0.log"
    log.write_text("[2026-12-01 12:32:50] Received sigquit from a child process.\n"
                   "torch.distributed.DistStoreError: Timed out after 61 seconds waiting for "
                   "clients. 1/2 clients joined.\n")
    cause = root_cause(LogScanner().scan_file(log))
    assert cause is not None and cause.kind == "rendezvous" and "DistStoreError" in cause.line
