"""The emulator's energy counter (sim/smi.py ``--nvml-energy``): idle watts over emulated time on
every GPU plus the busy extra over the busy seconds its rank publishes, stepping as the profile
says, in emulated joules; the counter never goes down across the ranks a node runs, and its
output is what cluster/power.py parses from a real node's NVML read."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.gpus import split_nodes
from pytest_ppsweep.cluster.power import parse_counter_step, parse_nvml_reads
from pytest_ppsweep.sim import smi
from pytest_ppsweep.sim.launch.gpustate import GpuStatePublisher, GpuUse, gpu_facts
from pytest_ppsweep.sim.model.profile import load_profile

TINY = load_profile("tiny")
SCALE = 10.0
T0 = smi.COUNTER_EPOCH_WALL_S + 1000.0  # a wall time on a counter step at every scale here


def _publisher(state: Path, pid: int) -> GpuStatePublisher:
    return GpuStatePublisher(state, "10.0.0.1", pid, {"host": "10.0.0.1", "profile": "tiny",
                                                      "time_scale": SCALE,
                                                      **gpu_facts(TINY.gpu)})


def _mj(state: Path, t: float) -> dict[int, int]:
    out = smi.nvml_reads("10.0.0.1", state, "tiny", 100.0, t)
    return {int(g["index"]): int(g["energy_mj"]) for g in out["gpus"]}  # type: ignore[attr-defined]


def test_idle_and_busy_watts_over_emulated_time(tmp_path: Path) -> None:
    p = _publisher(tmp_path, 111)
    p.publish([GpuUse(0, 1000)], busy_s={0: 0.0})
    before = _mj(tmp_path, T0)
    p.publish([GpuUse(0, 1000)], busy_s={0: 3.0})  # GPU 0's stage stepped 3 emulated s
    after = _mj(tmp_path, T0 + 1.0)  # 1 wall s = 10 emulated s
    power = TINY.power
    idle = power.idle_w * 10.0
    assert (after[1] - before[1]) / 1000 == pytest.approx(idle, abs=1)  # idle all along
    assert (after[0] - before[0]) / 1000 == pytest.approx(
        idle + (power.busy_w - power.idle_w) * 3.0, abs=1)


def test_the_counter_moves_only_every_step(tmp_path: Path) -> None:
    step_wall = TINY.power.counter_step_ms / 1000.0 / SCALE
    _publisher(tmp_path, 111).publish([GpuUse(0, 1000)], busy_s={0: 0.0})
    assert _mj(tmp_path, T0) == _mj(tmp_path, T0 + step_wall * 0.9)
    assert _mj(tmp_path, T0 + step_wall * 1.01)[1] > _mj(tmp_path, T0)[1]


def test_a_later_rank_on_the_node_continues_the_counter(tmp_path: Path) -> None:
    first = _publisher(tmp_path, 111)
    first.publish([GpuUse(0, 1000)], busy_s={0: 50.0})
    first.release()
    at_release = _mj(tmp_path, T0)
    second = _publisher(tmp_path, 222)  # a new boot: its scheduler starts from 0 busy seconds
    second.publish([GpuUse(0, 1000)], busy_s={0: 1.0})
    assert _mj(tmp_path, T0)[0] - at_release[0] == pytest.approx(
        (TINY.power.busy_w - TINY.power.idle_w) * 1.0 * 1000, abs=1)


def test_the_shim_prints_what_the_cluster_parses(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PPSWEEP_SIM_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("PPSWEEP_SIM_PROFILE", "tiny")
    monkeypatch.setenv("PPSWEEP_SIM_TIME_SCALE", str(SCALE))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert smi.main(["--host", "10.0.0.1,10.0.0.2", "--nvml-energy"]) == 0
    parts = split_nodes(out.getvalue(), ["10.0.0.1", "10.0.0.2"])
    for node, text in parts.items():
        reads, samples = parse_nvml_reads(node, text)
        assert [r.gpu for r in reads] == [f"{node}:0", f"{node}:1"]
        assert all(s.power_w == TINY.power.idle_w for s in samples)  # idle nodes
        assert parse_counter_step(text) == (TINY.power.counter_step_ms / 1000 / SCALE, SCALE)
