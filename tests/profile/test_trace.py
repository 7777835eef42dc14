"""The attribution parser on real torch-profiler traces (tests/data/traces/) and on hand-made
ones whose every interval is known."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO

from pytest_ppsweep.profile.__main__ import main
from pytest_ppsweep.profile.attribution import aggregate, stable_ranks, table_rows
from pytest_ppsweep.profile.trace import TraceError, kind_of, parse, rank_label, trace_files

TRACES = REPO / "tests" / "data" / "traces"
GLOO = TRACES / "gloo-2ranks"


def test_real_gloo_trace_counts_each_collective_by_kind() -> None:
    # tests/data/traces/gloo_layers.py on torch 2.13 CPU: 3 × (GEMM, all-reduce), a send/recv
    # pair, an all-gather, a barrier. Hand count from the file: rank 0's gloo:all_reduce
    # events last 117,449.919 + 181.594 + 3,613.558 µs (the first one connects the pair).
    r0 = parse(GLOO / "rank0.trace.json.gz")
    assert r0.source == "cpu" and r0.rank == "rank0"
    assert r0.calls == {"all_reduce": 3, "send_recv": 1, "all_gather": 1, "other": 1}
    assert r0.cumulative_ms["all_reduce"] == pytest.approx(121.245071, abs=1e-6)
    assert r0.p50_ms["all_reduce"] == pytest.approx(3.613558, abs=1e-6)
    assert r0.cumulative_ms["send_recv"] == pytest.approx(1.411692, abs=1e-6)  # gloo:send
    r1 = parse(GLOO / "rank1.trace.json.gz")
    assert r1.calls == r0.calls  # rank 1 has the gloo:recv of the pair
    for r in (r0, r1):
        # gloo works on its own threads while the caller waits: nothing overlaps the GEMMs
        assert r.overlap_ratio == 0.0
        assert r.compute_ms > 0 and r.exposed_ms == pytest.approx(r.comm_ms)
        assert r.share(r.compute_ms + r.exposed_ms + r.idle_ms) == pytest.approx(1.0)


def test_real_sglang_cpu_trace_has_gloo_collectives_on_every_rank() -> None:
    # SGLang 0.5.23 on CPU, PP2/TP2 over 4 loopback nodes, /start_profile with num_steps=2
    # (the profile window of test_matrix/cpu.toml captured it; see tests/data/traces/README.md).
    files = trace_files(TRACES / "sglang-cpu-pp2-tp2")
    ranks = [parse(f) for f in files]
    assert sorted(r.rank for r in ranks) == ["TP-0-PP-0", "TP-0-PP-1", "TP-1-PP-0", "TP-1-PP-1"]
    for r in ranks:
        assert r.source == "cpu"
        assert r.calls["all_reduce"] > 0 and r.calls["send_recv"] > 0, r.calls
        assert r.cumulative_ms["all_reduce"] > 0 and 0.0 <= r.overlap_ratio < 0.05
    # the TP pair of a stage runs the same all-reduces; the stages' PP hand-offs mirror
    by = {r.rank: r for r in ranks}
    assert by["TP-0-PP-0"].calls["all_reduce"] == by["TP-1-PP-0"].calls["all_reduce"]
    assert by["TP-0-PP-1"].calls["all_reduce"] == by["TP-1-PP-1"].calls["all_reduce"]
    layout = aggregate("pp2-tp2-ep1", ranks)
    assert len(layout.stable) == 4 and layout.calls["all_reduce"] > 0


def _event(name: str, ts: float, dur: float, cat: str = "kernel", **extra: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7, **extra}


def _write(path: Path, events: list[dict[str, Any]], gz: bool = True) -> Path:
    raw = json.dumps({"traceEvents": events}).encode()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def test_gpu_trace_overlap_exposed_and_idle_from_known_intervals(tmp_path: Path) -> None:
    events = [
        _event("sm90_gemm_bf16", 0, 10_000),
        _event("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", 5_000, 10_000),  # 5 ms overlap
        _event("ncclDevKernel_SendRecv(x)", 20_000, 10_000),
        _event("ncclKernel_AllGather_RING_LL_Sum_int8_t", 30_000, 2_000),
        _event("cudaLaunchKernel", 0, 40_000, cat="cuda_runtime"),  # CPU side: not looked at
        _event("c10d::allreduce_", 0, 40_000, cat="cpu_op"),
    ]
    r = parse(_write(tmp_path / "TP-3.trace.json.gz", events))
    assert r.source == "gpu" and r.rank == "TP-3"
    assert r.calls == {"all_reduce": 1, "send_recv": 1, "all_gather": 1}
    assert r.window_ms == pytest.approx(40.0)
    assert r.comm_ms == pytest.approx(22.0) and r.overlap_ms == pytest.approx(5.0)
    assert r.overlap_ratio == pytest.approx(5 / 22)
    assert r.exposed_ms == pytest.approx(17.0) and r.compute_ms == pytest.approx(10.0)
    assert r.idle_ms == pytest.approx(13.0)  # 40 − 10 − 17


def test_plain_all_reduce_is_kept_apart_from_send_recv_and_waits() -> None:
    assert kind_of("AllReduce") == kind_of("all_reduce") == kind_of("allreduce_") == "all_reduce"
    assert kind_of("SendRecv") == kind_of("send") == kind_of("recv_") == "send_recv"
    assert kind_of("_allgather_base_") == "all_gather"
    assert kind_of("_reduce_scatter_base_") == kind_of("ReduceScatter") == "reduce_scatter"
    assert kind_of("alltoall_base_") == kind_of("AllToAll") == "all_to_all"
    assert kind_of("barrier") == kind_of("broadcast_") == "other"


def test_c10d_ops_count_only_without_gloo_events(tmp_path: Path) -> None:
    events = [_event("c10d::allreduce_", 0, 100, cat="cpu_op"),
              _event("c10d::recv_", 200, 100, cat="cpu_op"),
              _event("record_param_comms", 400, 50, cat="cpu_op",
                     args={"Collective name": "allreduce"}),
              _event("aten::mm", 500, 100, cat="cpu_op")]
    r = parse(_write(tmp_path / "x.trace.json", events, gz=False))
    assert r.calls == {"all_reduce": 2, "send_recv": 1}
    with_gloo = [*events, _event("gloo:all_reduce", 0, 300, cat="user_annotation")]
    assert parse(_write(tmp_path / "y.trace.json", with_gloo)).calls == {"all_reduce": 1}


@pytest.mark.parametrize(
    ("content", "found"),
    [(b"\x1f\x8b\x08garbage", "not a Chrome trace"), (b"{not json", "not a Chrome trace"),
     (b'{"traceEvents": 3}', "expected a 'traceEvents' list"),
     (b'{"traceEvents": []}', "no complete ('X') event")],
)
def test_a_trace_that_cannot_be_parsed_names_the_file(
    tmp_path: Path, content: bytes, found: str
) -> None:
    path = tmp_path / "pp8-1.0-TP-1-PP-3.trace.json.gz"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        parse(path)
    assert str(path) in str(err.value) and found in str(err.value)


def test_stable_ranks_median_and_deltas_vs_the_baseline(tmp_path: Path) -> None:
    def rank(name: str, n_ar: int, ms: float) -> Path:
        evs = [_event("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", i * 1000 * ms, 1000 * ms)
               for i in range(n_ar)]
        return _write(tmp_path / f"{name}.trace.json.gz", evs)

    pp1 = [parse(rank(f"a-TP-{i}", 10 + i, 7.0)) for i in range(3)]
    late = parse(rank("a-TP-3", 1, 7.0))  # joined the window at its end
    layout = aggregate("pp1", [*pp1, late])
    assert [r.rank for r in stable_ranks([*pp1, late])] == ["TP-0", "TP-1", "TP-2"]
    assert layout.unstable == ("TP-3",) and layout.calls["all_reduce"] == 11
    pp8 = aggregate("pp8", [parse(rank(f"b-TP-{i}", 2, 5.0)) for i in range(2)])
    rows = table_rows({"pp1": layout.as_dict(), "pp8": pp8.as_dict()}, "pp1")
    row = next(r for r in rows if r["config_id"] == "pp8")
    assert row["calls_delta"] == pytest.approx(2 / 11 - 1)
    assert row["cumulative_delta"] == pytest.approx(10 / 77 - 1)
    assert row["p50_delta"] == pytest.approx(5 / 7 - 1) and row["baseline"] == "pp1"
    assert rank_label(Path("pp8-tp4-ep4-17.5-TP-1-PP-3-EP-1.trace.json.gz")) == "TP-1-PP-3-EP-1"


def test_standalone_command_prints_every_rank_and_fails_on_a_bad_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(GLOO)]) == 0
    out = capsys.readouterr().out
    assert "rank0" in out and "rank1" in out and '"all_reduce": 3' in out
    bad = tmp_path / "bad.trace.json"
    bad.write_text("nope")
    assert main([str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


def test_generic_nccl_kernels_take_the_kind_of_the_collective_that_launched_them(
    tmp_path: Path,
) -> None:
    # NCCL ≥ 2.19 names many kernels ncclDevKernel_Generic_1: the op is on the CPU side
    generic = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
    cpu = {"pid": 1, "tid": 11}
    events = [
        _event("record_param_comms", 0, 50, cat="cpu_op", args={"Collective name": "allreduce"},
               **cpu),
        _event("cudaLaunchKernel", 10, 5, cat="cuda_runtime", args={"correlation": 1}, **cpu),
        _event(generic, 100, 400, args={"correlation": 1}),
        _event("nccl:send", 600, 50, cat="user_annotation", **cpu),
        _event("cudaLaunchKernel", 610, 5, cat="cuda_runtime", args={"correlation": 2}, **cpu),
        _event(generic, 700, 300, args={"correlation": 2}),
        _event(generic, 1100, 100, args={"correlation": 3, "Collective name": "_allgather_base"}),
        _event(generic, 1300, 100, args={"correlation": 4}),  # launched outside any collective
        _event("sm90_gemm", 1500, 100),
    ]
    r = parse(_write(tmp_path / "TP-0.trace.json.gz", events))
    assert r.calls == {"all_reduce": 1, "send_recv": 1, "all_gather": 1, "other": 1}
    assert r.cumulative_ms["all_reduce"] == pytest.approx(0.4)
    assert r.compute_ms == pytest.approx(0.1)
