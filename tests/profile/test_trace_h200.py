"""The attribution parser on a REAL GPU trace: torch 2.11 + NCCL 2.28.9 on one NVIDIA H200
(tests/data/h200-1gpu/, made by pytest_ppsweep/comm/layers_trace.py: 2 profiled steps × 3 layers
of GEMM, async all-reduce, overlapping GEMM, then a batch_isend_irecv send/recv pair, at world
size 1). Every number is checked against a count made here from the raw file by another method
(a regex scan of the JSON text, pairwise interval sums) and against the profiler's own
``key_averages()`` that the program saved beside the trace."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from support.paths import DATA

from pytest_ppsweep.profile.__main__ import main
from pytest_ppsweep.profile.attribution import aggregate, table_rows
from pytest_ppsweep.profile.trace import parse, trace_files

H200 = DATA / "h200-1gpu" / "traces-w1"
TRACE = H200 / "layers-w1-TP-0.trace.json.gz"
SUMMARY = H200 / "layers-w1-TP-0.summary.json"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"  # cuBLAS' bf16 GEMM kernel on sm90
SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"

# torch's export writes one event as `"ph": "X", "cat": "<cat>", "name": "<name>", "pid": …,
# "tid": …,` then `"ts": <ts>, "dur": <dur>,` on the next line: scanned as text, not as JSON
_EVENT = re.compile(r'"ph": "X", "cat": "(?P<cat>[^"]*)", "name": "(?P<name>[^"]*)", '
                    r'"pid": [^,]*, "tid": [^,]*,\s*"ts": (?P<ts>[0-9.]+), "dur": (?P<dur>[0-9.]+)')


def _scan(cat: str, name: str | None = None) -> list[tuple[float, float]]:
    """(start, end) µs of the events of ``cat`` (and ``name``), by a regex over the raw text."""
    text = gzip.decompress(TRACE.read_bytes()).decode()
    return [(float(m["ts"]), float(m["ts"]) + float(m["dur"])) for m in _EVENT.finditer(text)
            if m["cat"] == cat and (name is None or m["name"] == name)]


def test_real_h200_trace_gemm_kernels_agree_with_a_hand_count() -> None:
    r = parse(TRACE)
    assert r.source == "gpu" and r.rank == "TP-0"
    gemms = _scan("kernel", GEMM)
    # hand count: 2 steps × 3 layers × 2 GEMMs, 12 kernels, 2,076.546 µs in all
    assert len(gemms) == 12
    assert sum(b - a for a, b in gemms) == pytest.approx(2076.546, abs=1e-3)
    assert r.compute_kernels == {GEMM: (12, pytest.approx(2.076546, abs=1e-6))}
    assert r.compute_calls == 12
    # one stream: the GEMMs never overlap, so the union the parser takes is their sum
    assert r.compute_ms == pytest.approx(sum(b - a for a, b in gemms) / 1e3, abs=1e-6)
    # and the profiler's own aggregate, saved by the program, says the same
    kernels = {k["name"]: k for k in json.loads(SUMMARY.read_text())["kernels"]}
    assert kernels[GEMM]["count"] == 12
    assert kernels[GEMM]["device_time_us"] == pytest.approx(2076.546, abs=1e-3)
    # the 12 memsets (cat gpu_memset, cuBLAS' own, same External id as aten::mm) are no kernel
    assert len(_scan("gpu_memset")) == 12 and kernels["Memset (Device)"]["count"] == 12


def test_world_size_one_all_reduce_launches_no_kernel_but_send_to_self_does() -> None:
    r = parse(TRACE)
    # the CPU side did issue 6 all-reduces (record_param_comms allreduce, nccl:all_reduce) …
    text = gzip.decompress(TRACE.read_bytes()).decode()
    assert text.count('"name": "nccl:all_reduce"') == 6
    assert text.count('"Collective name": "allreduce"') == 6
    # … yet NCCL with one rank launched no all-reduce kernel: none is reported
    assert not [m for m in _EVENT.finditer(text) if m["cat"] == "kernel"
                and m["name"].startswith("ncclDevKernel_AllReduce")]
    assert "all_reduce" not in r.calls and "all_reduce" not in r.cumulative_ms
    # the send/recv pair to itself did launch NCCL's SendRecv kernel (a local copy)
    sends = _scan("kernel", SENDRECV)
    assert len(sends) == 2 and r.calls == {"send_recv": 2}
    assert r.cumulative_ms["send_recv"] == pytest.approx(
        sum(b - a for a, b in sends) / 1e3, abs=1e-6)
    assert r.cumulative_ms["send_recv"] == pytest.approx(0.037568, abs=1e-6)
    # overlap by pairwise intersection of every comm kernel with every GEMM: none here
    pairwise = sum(max(0.0, min(b, d) - max(a, c)) for a, b in sends
                   for c, d in _scan("kernel", GEMM))
    assert pairwise == 0.0 and r.overlap_ms == 0.0 and r.overlap_ratio == 0.0
    assert r.exposed_ms == pytest.approx(r.comm_ms)
    # the window: the profiler's own span ("cat": "Trace", "PyTorch Profiler (0)", written
    # with another key order), which starts first and ends last of all events
    (span,) = re.findall(r'"cat": "Trace", "ts": ([0-9.]+), "dur": ([0-9.]+)', text)
    assert float(span[1]) == 7032.626 and r.window_ms == pytest.approx(7.032626, abs=1e-6)
    assert min(a for a, _b in _scan("cpu_op")) > float(span[0])
    assert r.share(r.compute_ms + r.exposed_ms + r.idle_ms) == pytest.approx(1.0)


def test_generic_kernel_under_a_coalesced_group_takes_its_members_kind(tmp_path: Path) -> None:
    # NCCL >= 2.19 may launch ncclDevKernel_Generic_1 for a group; torch's batch_isend_irecv
    # launches it under `nccl:coalesced`, after c10d::send / c10d::recv_ (record_param_comms
    # send, recv) on the same thread: the real trace with the kernel renamed to Generic
    data = json.loads(gzip.decompress(TRACE.read_bytes()))
    renamed = 0
    for e in data["traceEvents"]:
        if e.get("name") == SENDRECV:
            e["name"] = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
            renamed += 1
    assert renamed == 2
    path = tmp_path / "generic-TP-0.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    r = parse(path)
    assert r.calls == {"send_recv": 2}  # was "other": nccl:coalesced names no kind of its own


def test_real_h200_trace_through_the_layout_table_and_the_cli(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert trace_files(H200) == [TRACE]  # the summary.json beside it is no trace
    layout = aggregate("pp1-tp1", [parse(TRACE)])
    assert layout.stable == ("TP-0",) and layout.calls == {"send_recv": 2}
    (row,) = table_rows({"pp1-tp1": layout.as_dict()}, "pp1-tp1")
    assert row["kind"] == "send_recv" and row["calls"] == 2 and row["cumulative_delta"] == 0.0
    assert layout.as_dict()["per_rank"][0]["compute_calls"] == 12
    assert main([str(H200)]) == 0
    out = capsys.readouterr().out
    assert "TP-0 gpu" in out and "send_recv 2 ×" in out and "compute 12 kernels 2.077 ms" in out
