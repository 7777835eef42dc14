"""The emulator's profile window: Chrome traces of its scheduler in the format of real torch
traces, and on ppsweep.toml's cluster the shape of the seeds' §9.3 (PP1 vs PP8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ppsweep.profile.attribution import LayoutProfile, aggregate
from pytest_ppsweep.profile.trace import parse, trace_files
from pytest_ppsweep.profile.tracenodes import node_ranks, rank_of
from pytest_ppsweep.sim.model.placement import Layout, local_schedulers
from pytest_ppsweep.sim.model.profile import load_profile
from pytest_ppsweep.sim.model.tracerec import TraceRecorder, ar_per_layer
from pytest_ppsweep.sim.model.vbench import make_scheduler, run_round


def _window(tmp: Path, pp: int, tp: int, *, skip: tuple[int, ...] = ()) -> Path:
    """One profile window (num_steps = 3, the plugin's default) in a seeds' round: C=8, 40
    requests of 16,384 tokens (ppsweep.toml), in virtual time."""
    sched = make_scheduler(load_profile("kimi-k3-6000d"), Layout(tp=tp, pp=pp, ep=4, nnodes=4))
    out = tmp / f"pp{pp}"
    sched.recorder = TraceRecorder(sched.cost, 4, out, "17.25", prefix=f"pp{pp}", num_steps=3,
                                   skip_nodes=skip)
    run_round(sched, prompt_tokens=16384, output_tokens=1, concurrency=8, num_requests=40)
    assert sched.recorder.written, "the window did not end after num_steps"
    return out


@pytest.fixture(scope="module")
def seeds_pp1_pp8(tmp_path_factory: pytest.TempPathFactory) -> dict[int, LayoutProfile]:
    tmp = tmp_path_factory.mktemp("sim-trace")
    return {pp: aggregate(f"pp{pp}", [parse(f) for f in trace_files(_window(tmp, pp, 32 // pp))])
            for pp in (1, 8)}


def test_pp8_has_the_seeds_shape_against_pp1(seeds_pp1_pp8: dict[int, LayoutProfile]) -> None:
    pp1, pp8 = seeds_pp1_pp8[1], seeds_pp1_pp8[8]
    # seeds §9.3: 557 → 66 AllReduce calls per rank (−88 %), 4,160.6 → 392.3 ms (−91 %)
    assert 1 - pp8.calls["all_reduce"] / pp1.calls["all_reduce"] >= 0.80
    assert 1 - pp8.cumulative_ms["all_reduce"] / pp1.cumulative_ms["all_reduce"] >= 0.85
    assert pp8.p50_ms["all_reduce"] < pp1.p50_ms["all_reduce"]  # 7.10 → 5.83 ms: a smaller ring
    assert pp1.overlap_ratio < 0.01 and pp8.overlap_ratio < 0.01  # ~0 in both
    # PP8's non-AllReduce NCCL (Send/Recv plus stage waits) is there, and apart; PP1 has none
    assert pp8.cumulative_ms["send_recv"] > 0 and "send_recv" not in pp1.calls
    assert len(pp1.ranks) == len(pp8.ranks) == 32 and len(pp8.stable) == 32
    for lp in (pp1, pp8):  # every rank's window is compute, exposed communication or idle
        for r in lp.ranks:  # (the layout's shares are medians over ranks of different stages)
            parts = r.share(r.compute_ms) + r.share(r.exposed_ms) + r.share(r.idle_ms)
            assert parts == pytest.approx(1.0, abs=1e-6)


def test_every_rank_writes_sglangs_file_name_on_its_node(tmp_path: Path) -> None:
    out = _window(tmp_path, 8, 4, skip=(2,))
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 24 and all(n.startswith("pp8-17.25-TP-") for n in names)
    assert "pp8-17.25-TP-0-PP-0-EP-0.trace.json.gz" in names
    layout = Layout(tp=4, pp=8, ep=4, nnodes=4)
    have = {rank_of(n, 8) for n in names}
    for node in range(4):
        # the plugin's placement (SGLang's) is the emulator's
        mine = [(s.pp_rank, s.tp_rank) for s in local_schedulers(layout, node)]
        assert mine == node_ranks(8, 4, 4, node)
        assert all((p, t) in have for p, t in mine) == (node != 2)


def test_all_reduces_per_layer_add_up_to_the_profile() -> None:
    counts = ar_per_layer(61, 3.28)
    assert sum(counts) == 200 and set(counts) <= {3, 4}
