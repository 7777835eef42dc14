"""The comm package on the REAL single-H200 capture (tests/data/h200-1gpu/, see its README):
``nvidia-smi topo -m`` and ``-q`` of the machine, the worker's output at world size 1 with NCCL
2.28.9, the §9.2 section built from it, and ``nvidia-smi -q`` saved beside the comm results."""

from __future__ import annotations

import csv
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.matrices import one_cpu_node_sweep
from support.paths import DATA, REPO

from pytest_ppsweep.comm.domains import domain_label, tp_domains
from pytest_ppsweep.comm.records import read_output
from pytest_ppsweep.comm.runner import COMM_COLUMNS
from pytest_ppsweep.comm.smiq import SmiQError, parse_smi_q
from pytest_ppsweep.comm.topo import island_label, parse_topo
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.report.commview import comm_html, smi_lines

H200 = DATA / "h200-1gpu"
CPU = REPO / "test_matrix" / "cpu.toml"


def test_topology_label_of_the_real_one_gpu_topo() -> None:
    topo = parse_topo((H200 / "topo-m.txt").read_text(), "topo-m.txt")
    assert topo.gpus == (0,) and topo.links == {(0, 0): "X"}
    assert topo.numa == {0: "0"} and topo.cpus == {0: "0-15"}
    assert island_label(topo, [0]) == "same PCIe/NUMA island"  # one GPU: no pair to judge
    assert island_label(topo, [0, 1]) == "GPU1 not in topo -m"  # named, no crash
    sweep = load(CPU)
    cluster = sweep.cluster("cpu")
    assert domain_label(cluster, (0,), (0,), {0: topo}) == "same node"  # a 1-GPU "domain"
    assert domain_label(cluster, (0,), (0, 1), {0: topo}) == "same node, GPU1 not in topo -m"
    assert tp_domains(sweep.config("pp4-tp1-ep1"), cluster, {0: topo}) == []  # TP1: none


def test_real_smi_q_parses_and_agrees_with_its_xml() -> None:
    q = parse_smi_q((H200 / "smi-q.txt").read_text(), "smi-q.txt")
    xml = ET.parse(H200 / "smi-q.xml").getroot()  # `nvidia-smi -q -x`, the same seconds
    gpu = xml.find("gpu")
    assert gpu is not None
    assert (q.driver_version, q.cuda_version, q.attached_gpus) == (
        xml.findtext("driver_version"), xml.findtext("cuda_version"),
        int(xml.findtext("attached_gpus") or 0))
    assert (q.driver_version, q.cuda_version, q.attached_gpus) == ("580.159.04", "13.0", 1)
    (g,) = q.gpus
    assert g.bus_id == gpu.get("id") == "00000000:00:06.0"
    assert g.product_name == gpu.findtext("product_name") == "NVIDIA H200"
    assert g.architecture == "Hopper" and g.uuid == gpu.findtext("uuid")
    assert g.memory_total_mib == 143771 == int((gpu.findtext("fb_memory_usage/total") or "")
                                               .split()[0])
    assert (g.mig_mode, g.persistence_mode) == ("Disabled", "Enabled")
    assert (g.pcie_gen, g.pcie_width) == ("5", "16x") and g.fabric_state == "N/A"
    assert g.tree["ECC Mode"]["Current"] == "Enabled"  # the whole tree is kept
    assert q.summary() == "1 × NVIDIA H200 (143771 MiB), driver 580.159.04, CUDA 13.0, MIG off"
    with pytest.raises(SmiQError, match=r"node 601: no 'Driver Version' line"):
        parse_smi_q("NVIDIA-SMI has failed because it couldn't communicate\n", "node 601")
    with pytest.raises(SmiQError, match="'Attached GPUs' is 2 but 1 'GPU <bus id>' sections"):
        parse_smi_q((H200 / "smi-q.txt").read_text().replace(
            "Attached GPUs                                          : 1",
            "Attached GPUs                                          : 2"), "x")


def test_real_worker_output_at_world_size_one() -> None:
    # allreduce_worker.py with NCCL on the one H200: its JSON lines among NCCL_DEBUG=INFO's
    log = H200 / "allreduce-w1.log"
    text = log.read_text()
    assert "NCCL INFO NCCL version 2.28.9+cuda13.0" in text
    assert "NCCL_NVLS_ENABLE set by environment to 0." in text
    out = read_output([log])
    assert out.problems(1, ["vm"]) == [] and out.started == {0} and out.done == {0}
    sizes = [r["size_bytes"] for r in out.results]
    assert sizes == [1024 << i for i in range(19)]  # 1 KiB … 256 MiB
    start = next(e for e in out.last.values())  # the last event of rank 0 is its "done"
    assert start["event"] == "done" and start["status"] == 0
    assert '"nccl": "2.28.9"' in text and '"torch": "2.11.0+cu130"' in text
    for r in out.results:
        assert (r["world_size"], r["backend"], r["wrong"]) == (1, "nccl", 0)
        assert r["busbw_gbs"] == 0.0  # 2(n-1)/n = 0: one rank moves nothing
        assert r["algbw_gbs"] == pytest.approx(r["size_bytes"] / r["time_us"] / 1e3, rel=0.01)
    # with one rank the time is the launch path alone: flat from 1 KiB to 256 MiB (no kernel)
    times = [r["time_p50_us"] for r in out.results]
    assert max(times) < 100.0, times


def _comm_csv(run_dir: Path) -> None:
    out = read_output([H200 / "allreduce-w1.log"])
    rows = [{"run_id": "h200", "config_id": "pp1-tp1", "pp": 1, "tp": 1, "domain": "tp1",
             "label": "same node", "nodes": 1, "gpus": 1, "stages": "0", "tool": "torch",
             "simulated": False, **{k: r.get(k, "") for k in COMM_COLUMNS if k in r}}
            for r in out.results]
    with (run_dir / "comm.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COMM_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def test_report_section_from_the_real_results_and_smi_q(tmp_path: Path) -> None:
    _comm_csv(tmp_path)
    (tmp_path / "comm" / "pp1-tp1").mkdir(parents=True)
    (tmp_path / "comm" / "pp1-tp1" / "smi-q-node0.txt").write_text(
        (H200 / "smi-q.txt").read_text())
    assert smi_lines(tmp_path) == [
        "node0: 1 × NVIDIA H200 (143771 MiB), driver 580.159.04, CUDA 13.0, MIG off"]
    page = comm_html(tmp_path)
    assert "nvidia-smi -q: node0: 1 × NVIDIA H200 (143771 MiB), driver 580.159.04" in page
    m128 = read_output([H200 / "allreduce-w1.log"]).results[17]
    assert m128["size_bytes"] == 128 << 20
    assert f"{m128['time_us'] / 1e3:,.2f} ms" in page and "0.00 GB/s" in page
    assert page.count("<polyline") == 1


def _smi_stub(tmp_path: Path) -> Path:
    """nvidia-smi on a node without GPUs: the real H200 answers, plus a line that leaks the
    cluster's secret (as a misbehaving wrapper might print its env)."""
    stub = tmp_path / "nvidia-smi"
    stub.write_text(
        f"#!{sys.executable}\nimport pathlib, sys\n"
        f"data = pathlib.Path({str(H200)!r})\n"
        "if sys.argv[1:] == ['topo', '-m']:\n    print((data / 'topo-m.txt').read_text(), end='')\n"
        "elif sys.argv[1:] == ['-q']:\n    print((data / 'smi-q.txt').read_text(), end='')\n"
        "    print('wrapper env: HF_TOKEN=hf_h200_secret_value')\n"
        "else:\n    sys.exit(6)\n")
    stub.chmod(0o755)
    return stub


def test_comm_step_saves_smi_q_beside_topo_redacted(tmp_path: Path) -> None:
    from pytest_ppsweep.cluster.registry import Registry
    from pytest_ppsweep.comm.runner import run_comm
    from pytest_ppsweep.folder.runfolder import RunStore

    text = one_cpu_node_sweep("127.0.42.41", 42250, 42260)
    text = re.sub(r"nvidia_smi = \[\].*", f'nvidia_smi = ["{_smi_stub(tmp_path)}"]', text)
    text = text.replace("[clusters.cpu.env]\n",
                        '[clusters.cpu.env]\nHF_TOKEN = "hf_h200_secret_value"\n')
    perf = tmp_path / "all_reduce_perf"
    perf.write_text(f"#!/bin/sh\ncat {DATA / 'nccl-tests' / 'all_reduce_perf-h100-2x8.txt'}\n")
    perf.chmod(0o755)
    path = tmp_path / "one.toml"
    path.write_text(text + f'\n[comm]\ntool = "nccl-tests"\nall_reduce_perf = "{perf}"\n'
                    'max_size = "8G"\n')
    sweep = load(path)
    store = RunStore(tmp_path / "r", "run")
    with Registry() as registry:
        (run,), notes = run_comm(sweep, sweep.cluster("cpu"), sweep.config("pp1-tp4-ep1"),
                                 store, registry)
    folder = store.dir / "comm" / "pp1-tp4-ep1"
    assert (folder / "topo-node0.txt").read_text() == (H200 / "topo-m.txt").read_text()
    saved = (folder / "smi-q-node0.txt").read_text()
    assert "hf_h200_secret_value" not in saved and "HF_TOKEN=***" in saved
    assert saved.startswith((H200 / "smi-q.txt").read_text())  # the capture itself unchanged
    assert parse_smi_q(saved).gpus[0].product_name == "NVIDIA H200"
    assert notes == []
    # a 4-GPU TP domain on a node whose topo -m knows one GPU: labelled, not a crash
    assert run.domain.label == "same node, GPU1 not in topo -m"


def test_emulator_shim_answers_smi_q_in_the_real_layout() -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "pytest_ppsweep.sim.smi", "--host", "127.0.42.1",
                          "-q"], capture_output=True, text=True, check=True, cwd=REPO).stdout
    q = parse_smi_q(out, "shim")
    assert q.attached_gpus == len(q.gpus) == 8  # the default profile's node
    assert len({g.uuid for g in q.gpus}) == 8 and all(g.memory_total_mib for g in q.gpus)
    assert q.summary().startswith("8 × ") and q.summary().endswith(", MIG off")
