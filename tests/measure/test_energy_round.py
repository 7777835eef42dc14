"""A round's energy from the reads around it (measure/energy.of_round): the counter's
difference cut to the round's own edges at the power each read saw, the method and reasons when
a node cannot read NVML or the cluster has no GPUs, and the results.csv cells (blank with the
reasons, never 0)."""

from __future__ import annotations

import pytest

from pytest_ppsweep.cluster.power import CounterRead, EnergyRead, PowerSample
from pytest_ppsweep.folder.runfolder import RESULT_COLUMNS
from pytest_ppsweep.measure import energy


def _read(t: float, mj: dict[str, int], watts: float, scale: float = 1.0,
          problems: tuple[str, ...] = ()) -> EnergyRead:
    return EnergyRead(tuple(CounterRead(g, t, v) for g, v in mj.items()),
                      tuple(PowerSample(g, t, watts) for g in mj), 0.001, problems,
                      time_scale=scale)


def test_the_counter_window_is_cut_to_the_round_at_the_power_each_read_saw() -> None:
    # two GPUs read 0.5 s before a 10 s round and 1.5 s after it, idle 100 W at both reads
    before = _read(100.0, {"n:0": 0, "n:1": 0}, 100.0)
    after = _read(112.0, {"n:0": 5_000_000, "n:1": 3_000_000}, 100.0)
    w = energy.of_round(before, after, 2, start_s=100.5, end_s=110.5)
    assert w.method == "counter" and w.valid
    # 5000 J - 100 W x (0.5 + 1.5) s, and 3000 J - 200 J
    assert [g.joules for g in w.gpus] == pytest.approx([4800.0, 2800.0])
    assert (w.start_s, w.end_s) == (100.5, 110.5)


def test_the_emulators_counter_is_cut_at_its_time_scale() -> None:
    # the emulator's joules are power times emulated seconds: 100 W over 0.5 wall s at x100
    before = _read(0.0, {"n:0": 0}, 100.0, scale=100.0)
    after = _read(2.0, {"n:0": 50_000_000}, 100.0, scale=100.0)
    w = energy.of_round(before, after, 1, start_s=0.5, end_s=2.0)
    assert w.joules == pytest.approx(50_000.0 - 100.0 * 100.0 * 0.5)


def test_without_the_round_edges_the_whole_read_span_counts() -> None:
    w = energy.of_round(_read(0.0, {"n:0": 0}, 100.0), _read(10.0, {"n:0": 1_000_000}, 100.0), 1)
    assert w.joules == pytest.approx(1000.0)


def test_a_cluster_without_gpus_has_no_figure_and_says_so() -> None:
    none = EnergyRead((), (), None, (), no_gpus=True)
    w = energy.of_round(none, none, 4)
    assert w.joules is None and w.reasons == (energy.NO_GPUS,)
    row = w.per_token(100, 10, 2).as_row()
    assert row["energy_j"] is None and row["energy_j_per_total_token"] is None
    assert row["energy_reasons"] == "no_gpus" and row["energy_method"] == ""
    assert set(row) == set(energy.ENERGY_COLUMNS)


def test_a_node_that_cannot_read_nvml_makes_the_round_invalid_not_zero() -> None:
    ok = _read(0.0, {"a:0": 0}, 100.0)
    lost = EnergyRead((), (), None, ("b: NVML read failed: No module named 'pynvml'",))
    w = energy.of_round(ok, EnergyRead(ok.reads, ok.samples, None, lost.problems), 2)
    assert w.joules is None
    assert energy.NVML_UNAVAILABLE in w.reasons and energy.EXPECTED_GPU_COUNT_MISMATCH in w.reasons


def test_without_the_counter_the_power_read_at_each_end_is_integrated_and_named() -> None:
    def power_only(t: float, watts: float) -> EnergyRead:
        return EnergyRead((), (PowerSample("n:0", t, watts),), None, ())

    w = energy.of_round(power_only(0.0, 100.0), power_only(1.0, 300.0), 1)
    assert w.method == "sampled_power" and w.joules == pytest.approx(200.0)
    # two samples 10 s apart: beyond the sampling gap, so not a number
    long = energy.of_round(power_only(0.0, 100.0), power_only(10.0, 300.0), 1)
    assert long.joules is None and long.reasons == (energy.SAMPLING_GAP,)


def test_no_reads_at_all_is_counter_missing() -> None:
    empty = EnergyRead((), (), None, ())
    w = energy.of_round(empty, empty, 1)
    assert w.joules is None and energy.COUNTER_MISSING in w.reasons


def test_results_csv_has_every_energy_column() -> None:
    assert set(energy.ENERGY_COLUMNS) <= set(RESULT_COLUMNS)
