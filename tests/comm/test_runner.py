"""The comm package on captured data: nccl-tests' table, `nvidia-smi topo -m`, TP domains and
their labels, the [comm] table's errors, the §9.2 table and the report section."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.matrices import cpu_text, one_cpu_node_sweep
from support.paths import DATA, REPO, SEED

from pytest_ppsweep.comm.domains import tp_domains
from pytest_ppsweep.comm.ncclperf import NcclPerfError, parse_all_reduce_perf
from pytest_ppsweep.comm.records import read_output
from pytest_ppsweep.comm.table import summary_rows
from pytest_ppsweep.comm.topo import TopoError, island_label, parse_topo
from pytest_ppsweep.matrix.commspec import parse_size
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.schema import MatrixError
from pytest_ppsweep.report.commview import COMM_TITLE, comm_html, comm_terminal

PERF = DATA / "nccl-tests" / "all_reduce_perf-h100-2x8.txt"
CPU = REPO / "test_matrix" / "cpu.toml"


def _sim_topo() -> str:
    out = subprocess.run([sys.executable, "-m", "pytest_ppsweep.sim.smi", "--host", "127.0.42.1",
                          "topo", "-m"], capture_output=True, text=True, check=True, cwd=REPO)
    return out.stdout


def test_all_reduce_perf_table_of_a_real_run() -> None:
    rows = parse_all_reduce_perf(PERF.read_text(), str(PERF))
    assert len(rows) == 31 and rows[0].size_bytes == 8 and rows[-1].size_bytes == 8 << 30
    at128 = next(r for r in rows if r.size_bytes == 128 << 20)
    assert (at128.count, at128.dtype, at128.redop) == (33554432, "float", "sum")
    assert (at128.time_us, at128.algbw_gbs, at128.busbw_gbs, at128.wrong) == (
        1652.2, 81.24, 152.32, 0)
    assert at128.in_place_time_us == 1636.7 and at128.in_place_busbw_gbs == 153.76
    assert rows[-3].time_us == 12646  # a time printed without decimals
    # busbw = algbw × 2(n-1)/n for the 16 ranks of the capture, on every large row
    for r in rows:
        if r.algbw_gbs >= 10:
            assert r.busbw_gbs == pytest.approx(r.algbw_gbs * 2 * 15 / 16, rel=0.01)


def test_all_reduce_perf_without_root_column_and_unchecked() -> None:
    text = ("#       size         count      type   redop     time   algbw   busbw  error"
            "     time   algbw   busbw  error\n"
            "     1048576        262144     float     sum    203.2    5.16    9.68    N/A"
            "    207.2    5.06    9.49    N/A\n")
    (row,) = parse_all_reduce_perf(text)
    assert (row.size_bytes, row.time_us, row.busbw_gbs, row.wrong) == (1048576, 203.2, 9.68, None)


def test_all_reduce_perf_garbage_names_its_source() -> None:
    with pytest.raises(NcclPerfError, match=r"node0\.log: no '# size count"):
        parse_all_reduce_perf("Segmentation fault\n", "node0.log")
    header = PERF.read_text().split("           8 ")[0]
    with pytest.raises(NcclPerfError, match="a header but no result rows"):
        parse_all_reduce_perf(header, "x")


def test_topo_of_the_real_h200_capture() -> None:
    topo = parse_topo((DATA / "topo.txt").read_text())
    assert topo.gpus == (0,) and topo.numa == {0: "0"} and topo.cpus == {0: "0-15"}
    assert island_label(topo, [0]) == "same PCIe/NUMA island"
    assert island_label(topo, [0, 1]) == "GPU1 not in topo -m"
    with pytest.raises(TopoError, match="no header row"):
        parse_topo("NVIDIA-SMI has failed\n", "node 601")


def test_emulated_topo_has_the_seeds_islands() -> None:
    topo = parse_topo(_sim_topo())
    assert topo.gpus == tuple(range(8))
    assert island_label(topo, [0, 1, 2, 3]) == "same PCIe/NUMA island"
    assert island_label(topo, [4, 5, 6, 7]) == "same PCIe/NUMA island"
    assert island_label(topo, range(8)) == "across 2 NUMA islands"


def test_domains_of_the_seed_layouts() -> None:
    sweep = load(SEED)
    cluster = sweep.cluster("local")
    topo = parse_topo(_sim_topo())
    topos = dict.fromkeys(range(4), topo)
    got = {c.id: [(d.name, d.label, d.nodes, d.gpus, d.stages)
                  for d in tp_domains(c, cluster, topos)] for c in sweep.configs}
    assert got["pp1-tp32-ep4"] == [("tp32", "4 nodes", (0, 1, 2, 3), tuple(range(8)), (0,))]
    assert got["pp2-tp16-ep4"] == [("tp16", "2 nodes", (0, 1), tuple(range(8)), (0, 1))]
    assert got["pp4-tp8-ep4"] == [("tp8", "same node, across 2 NUMA islands", (0,),
                                   tuple(range(8)), (0, 1, 2, 3))]
    assert got["pp8-tp4-ep4"] == [("tp4", "same node, same PCIe/NUMA island", (0,),
                                   (0, 1, 2, 3), tuple(range(8)))]
    # without topo -m: the cluster description only
    assert [d.label for d in tp_domains(sweep.configs[3], cluster)] == ["same node"]


def test_domains_of_the_cpu_cluster() -> None:
    sweep = load(CPU)
    cluster = sweep.cluster("cpu")
    by = {c.id: tp_domains(c, cluster) for c in sweep.configs}
    assert [(d.name, d.label, d.nodes) for d in by["pp1-tp4-ep1"]] == [("tp4", "4 nodes",
                                                                        (0, 1, 2, 3))]
    assert [(d.name, d.label, d.stages) for d in by["pp2-tp2-ep1"]] == [("tp2", "2 nodes",
                                                                        (0, 1))]
    assert by["pp4-tp1-ep1"] == []  # TP1: no all-reduce


def _with_comm(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(cpu_text() + "\n[comm]\n" + table + "\n")
    return path


def test_comm_table_sizes_and_defaults(tmp_path: Path) -> None:
    assert load(CPU).comm is None
    spec = load(_with_comm(tmp_path, 'max_size = "4M"\niters = 3')).comm
    assert spec is not None and spec.sizes[0] == 1024 and spec.sizes[-1] == 4 << 20
    assert len(spec.sizes) == 13 and spec.iters == 3 and spec.tool == "torch"
    spec = load(_with_comm(tmp_path, 'sizes = ["128M", 268435456, "1K"]')).comm
    assert spec is not None and spec.sizes == (1024, 128 << 20, 256 << 20)
    assert parse_size("256MiB", "k") == 256 << 20


@pytest.mark.parametrize(("table", "message"), [
    ('max_size = "12Q"', r"sweep\.toml: key 'comm\.max_size': expected a size .* found '12Q'"),
    ('min_size = 1023', r"key 'comm\.min_size': expected a multiple of 4 bytes"),
    ('sizes = ["1K", true]', r"key 'comm\.sizes\[1\]': expected a size"),
    ('tool = "mpi"', r"key 'comm\.tool': expected one of 'torch', 'nccl-tests', found str 'mpi'"),
    ('tool = "nccl-tests"', r"key 'comm\.all_reduce_perf': expected the path of nccl-tests'"),
    ('iter = 3', r"unknown key 'comm\.iter' \(did you mean 'iters'\?\)"),
])
def test_comm_table_bad_input_names_file_and_key(tmp_path: Path, table: str, message: str
                                                 ) -> None:
    with pytest.raises(MatrixError, match=message):
        load(_with_comm(tmp_path, table))


def _rows(config: str, domain: str, busbw: dict[int, float], time_us: dict[int, float]
          ) -> list[dict[str, object]]:
    return [{"config_id": config, "domain": domain, "label": "2 nodes", "tp": 16, "nodes": 2,
             "tool": "torch", "size_bytes": s, "time_us": time_us[s], "busbw_gbs": b,
             "simulated": False} for s, b in busbw.items()]


def test_summary_table_and_report_section(tmp_path: Path) -> None:
    m128, m256 = 128 << 20, 256 << 20
    rows = (_rows("pp2-tp16-ep4", "tp16", {1024: 0.01, m128: 40.31, m256: 40.89},
                  {1024: 30.0, m128: 6240.0, m256: 12300.0})
            + _rows("pp8-tp4-ep4", "tp4", {1024: 0.02, 4 << 20: 20.0}, {1024: 20.0,
                                                                         4 << 20: 300.0}))
    got = summary_rows(rows)
    assert got[0]["latency_128m_ms"] == 6.24 and got[0]["busbw_128m_gbs"] == 40.31
    assert got[0]["busbw_mean_128m_256m_gbs"] == pytest.approx(40.6)
    assert got[1]["latency_128m_ms"] == "" and got[1]["busbw_max_gbs"] == 20.0
    import csv

    with (tmp_path / "comm.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    page = comm_html(tmp_path)
    assert COMM_TITLE in page and "6.24 ms" in page and "40.60 GB/s" in page
    assert page.count("<polyline") == 2 and "pp8-tp4-ep4 tp4" in page
    assert comm_terminal(tmp_path)[0] == COMM_TITLE
    assert comm_html(tmp_path / "none") == ""


def test_worker_lines_name_node_and_rank(tmp_path: Path) -> None:
    log0, log1 = tmp_path / "node0.log", tmp_path / "node1.log"
    log0.write_text('noise\n{"ppsweep_comm": 1, "event": "start", "rank": 0, "node": "a"}\n'
                    '{"ppsweep_comm": 1, "event": "init", "rank": 0, "node": "a"}\n')
    log1.write_text('{"ppsweep_comm": 1, "event": "error", "kind": "wrong_sum", "rank": 1, '
                    '"node": "b (127.0.42.2)", "message": "1 of 256 elements differ"}\n{broken\n')
    out = read_output([log0, log1])
    assert out.problems(2, ["a", "b (127.0.42.2)"]) == [
        "wrong sum: b (127.0.42.2) rank 1: 1 of 256 elements differ",
        "no result from 1 other rank(s) (0): stopped after the failure above"]
    out.errors.clear()  # no error line at all: every rank without a result is named
    assert out.problems(3, ["a", "b", "c"]) == ["no result: a rank 0: last event 'init'",
                                                "no result: b rank 1: last event 'error'",
                                                "no result: c rank 2: no output at all"]


def _perf_stub(tmp_path: Path, capture: str) -> Path:
    """A stand-in for all_reduce_perf on a node without GPUs: it records its argv and the
    CUDA_VISIBLE_DEVICES it got, then prints a captured real table."""
    out = tmp_path / "perf-capture.txt"
    out.write_text(capture)
    stub = tmp_path / "all_reduce_perf"
    stub.write_text(f"#!/bin/sh\necho \"argv: $*\" > {tmp_path}/argv.txt\n"
                    f"echo \"gpus: $CUDA_VISIBLE_DEVICES\" >> {tmp_path}/argv.txt\ncat {out}\n")
    stub.chmod(0o755)
    return stub


def _one_node(tmp_path: Path, stub: Path) -> Path:
    text = one_cpu_node_sweep("127.0.42.31", 42230, 42240)
    path = tmp_path / "one.toml"
    path.write_text(text + f'\n[comm]\ntool = "nccl-tests"\nall_reduce_perf = "{stub}"\n'
                    'max_size = "8G"\n')
    return path


def test_nccl_tests_tool_runs_the_binary_and_parses_its_table(tmp_path: Path) -> None:
    from pytest_ppsweep.cluster.registry import Registry
    from pytest_ppsweep.comm.runner import run_comm
    from pytest_ppsweep.folder.runfolder import RunStore

    sweep = load(_one_node(tmp_path, _perf_stub(tmp_path, PERF.read_text())))
    store = RunStore(tmp_path / "r", "run")
    with Registry() as registry:
        (run,), _ = run_comm(sweep, sweep.cluster("cpu"), sweep.config("pp1-tp4-ep1"), store,
                             registry)
    argv = (tmp_path / "argv.txt").read_text()
    assert "-b 1024 -e 8589934592 -f 2 -w 5 -n 20 -c 1 -g 4" in argv and "gpus: 0,1,2,3" in argv
    assert len(run.rows) == 31 and {r["tool"] for r in run.rows} == {"nccl-tests"}
    (row,) = summary_rows(run.rows)
    assert (row["latency_128m_ms"], row["busbw_128m_gbs"]) == (1.6522, 152.32)


def test_nccl_tests_wrong_values_fail_naming_the_node(tmp_path: Path) -> None:
    from pytest_ppsweep.cluster.registry import Registry
    from pytest_ppsweep.comm.runner import CommFailed, run_comm
    from pytest_ppsweep.folder.runfolder import RunStore

    bad = PERF.read_text().replace("81.24  152.32      0", "81.24  152.32     12")
    sweep = load(_one_node(tmp_path, _perf_stub(tmp_path, bad)))
    with pytest.raises(CommFailed, match=r"wrong sum: 12 wrong elements at 128M "
                       r"\(all_reduce_perf on 127\.0\.42\.31 \(127\.0\.42\.31\)\)"), \
            Registry() as registry:
        run_comm(sweep, sweep.cluster("cpu"), sweep.config("pp1-tp4-ep1"),
                 RunStore(tmp_path / "r", "run"), registry)
