"""The emulator's per-GPU memory against the seeds' §8 worst-rank table (kimi-k3-6000d).

Cheap: no boot and no sweep. Each node's GPUs are published from the memory plan the way a rank
publishes them after a benchmark whose largest micro-batch was a full 8,192-token chunk (the
seeds' 16K -> 1 workload), read back through the emulated ``nvidia-smi`` and reduced to the
worst rank by the plugin's own parser, as a sweep does at its ``after`` snapshot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ppsweep.cluster.gpus import QUERY_ARGS, parse_query_gpu
from pytest_ppsweep.measure.gpu import worst_rank
from pytest_ppsweep.sim import smi
from pytest_ppsweep.sim.launch.gpustate import GpuStatePublisher, GpuUse
from pytest_ppsweep.sim.model.gpumem import MIB, MemoryPlan, plan_memory
from pytest_ppsweep.sim.model.placement import Layout, local_schedulers
from pytest_ppsweep.sim.model.profile import load_profile

KIMI = load_profile("kimi-k3-6000d")
TOTAL = KIMI.gpu.memory_total_mib
CHUNK = 8192
TOLERANCE_MIB = 300

# seeds §8 (001 lines 35-41; PP16/TP2/EP2 from 000 §8, run with --disable-decode-cuda-graph):
# highest per-GPU memory in the post-benchmark snapshot across the four nodes, MiB
SEEDS_PEAK_MIB = {1: 81_355, 2: 80_335, 4: 82_417, 8: 79_407, 16: 79_989}


def seeds_plan(pp: int, a2a: str = "none", frac: float | None = None) -> MemoryPlan:
    """The seeds' layout of ``pp`` (EP4, EP2 on PP16; EP = TP with DeepEP) at their flags."""
    tp = 32 // pp
    ep = tp if a2a == "deepep" else (4 if pp < 16 else 2)
    return plan_memory(
        KIMI,
        Layout(tp=tp, pp=pp, ep=ep, nnodes=4),
        mem_fraction_static=frac,  # None: the profile's default, the seeds' 0.88
        chunked_prefill_size=CHUNK,
        decode_graph=pp != 16,
        moe_a2a_backend=a2a,
    )


def smi_worst(
    mem: MemoryPlan,
    state_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[int, int]:
    """(worst used MiB, its headroom) over the 4 nodes, read through the emulated nvidia-smi."""
    monkeypatch.setenv("PPSWEEP_SIM_STATE_DIR", str(state_dir))
    monkeypatch.setenv("PPSWEEP_SIM_PROFILE", KIMI.name)
    gpus = []
    for node in range(mem.layout.nnodes):
        host = f"127.0.41.{200 + node}"  # file names only: nothing listens
        pub = GpuStatePublisher(state_dir, host, 4242 + node, {"gpu_count": 8})
        pub.publish([GpuUse(s.gpu_index, mem.used_mib(s.pp_rank, "ready", CHUNK))
                     for s in local_schedulers(mem.layout, node)])  # fmt: skip
        capsys.readouterr()
        assert smi.main(["--host", host, *QUERY_ARGS]) == 0
        gpus += parse_query_gpu(capsys.readouterr().out, f"n{node}")
        pub.remove()
    worst = worst_rank(gpus)
    assert worst is not None and worst.total_mib == TOTAL
    return worst.used_mib, worst.headroom_mib


@pytest.mark.parametrize("pp", sorted(SEEDS_PEAK_MIB))
def test_worst_rank_headroom_matches_the_seeds_table(
    pp: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    used, headroom = smi_worst(seeds_plan(pp), tmp_path, capsys, monkeypatch)
    seeds_headroom = TOTAL - SEEDS_PEAK_MIB[pp]
    assert abs(headroom - seeds_headroom) <= TOLERANCE_MIB, (pp, used, SEEDS_PEAK_MIB[pp])
    # the plan and the nvidia-smi view agree
    plan = seeds_plan(pp)
    assert used == max(plan.used_mib(s, "ready", CHUNK) for s in range(pp))


def test_the_seeds_headroom_order_holds() -> None:
    # seeds §8: PP8 has the best worst-rank headroom, PP4 the worst
    headroom = {pp: TOTAL - max(m.used_mib(s, "ready", CHUNK) for s in range(pp))
                for pp, m in ((pp, seeds_plan(pp)) for pp in (1, 2, 4, 8))}  # fmt: skip
    assert max(headroom, key=headroom.__getitem__) == 8
    assert min(headroom, key=headroom.__getitem__) == 4


def test_static_line_follows_sglangs_kv_sizing() -> None:
    # SGLang 0.5.23: the heaviest stage ends the KV allocation at
    # total - (total - resident before the load) x (1 - mem_fraction_static)
    resident = KIMI.gpu.cuda_context_mib + KIMI.memory.nccl_buffer_mib
    line = TOTAL - (TOTAL - resident) * (1 - 0.88)
    for pp in (1, 2, 4, 8, 16):
        mem = seeds_plan(pp)
        kv_end = max(mem.used_mib(s, "kv") for s in range(pp))
        assert line - 2 <= kv_end <= line + 1, (pp, kv_end, line)
    # a lower static fraction shrinks the KV pool, not what comes after it
    low, high = seeds_plan(4, frac=0.80), seeds_plan(4)
    assert low.max_total_num_tokens < high.max_total_num_tokens
    after = [m.used_mib(1, "ready", CHUNK) - m.used_mib(1, "kv") for m in (low, high)]
    assert abs(after[0] - after[1]) <= 1  # int MiB rounding


def test_deepep_does_not_fit_pp4_and_fits_pp8_at_the_seeds_fraction() -> None:
    # seeds §10's smoke question: DeepEP's buffers (EP rewritten to TP) against the worst rank
    for pp, fits in ((4, False), (8, True), (16, True)):
        mem = seeds_plan(pp, "deepep")
        need = max(mem.used_mib(s, "ready", CHUNK) for s in range(pp))
        assert (need <= TOTAL) is fits, (pp, need, mem.a2a_bytes / MIB)
    # the buffer alone exceeds PP4's emulated headroom, like the seeds' 3,234 MiB
    pp4 = seeds_plan(4)
    free4 = TOTAL - max(pp4.used_mib(s, "ready", CHUNK) for s in range(4))
    assert seeds_plan(4, "deepep").a2a_bytes / MIB > free4
